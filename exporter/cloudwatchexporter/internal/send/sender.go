// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package send // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/send"

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"
)

// ErrNotSent marks a request that was never attempted (the export was
// cancelled, or there were no credentials to sign it with).
var ErrNotSent = errors.New("request not sent")

// AWSSource is where the AWS configuration comes from besides the
// standard chain: the exporter's region, profile and role_arn.
type AWSSource struct {
	Region, Profile, RoleARN string
}

// Putter sends one PutMetricData request.
type Putter interface {
	Put(ctx context.Context, namespace string, datums []translate.Datum) error
}

// RequestOutcome classifies how a request ended; it is the `outcome`
// attribute of the requests telemetry counter.
type RequestOutcome uint8

// The request outcomes.
const (
	OutcomeSuccess      RequestOutcome = iota
	OutcomeThrottled                   // retry after a delay
	OutcomeServerError                 // 5xx: retry
	OutcomeNetworkError                // no answer: retry
	OutcomeAuthError                   // credentials refused: retry (they may be refreshed or fixed)
	OutcomeRejected                    // the request is invalid: never retry it
	NumOutcomes
)

var outcomeNames = [NumOutcomes]string{
	OutcomeSuccess:      "success",
	OutcomeThrottled:    "throttled",
	OutcomeServerError:  "server_error",
	OutcomeNetworkError: "network_error",
	OutcomeAuthError:    "auth_error",
	OutcomeRejected:     "rejected",
}

func (o RequestOutcome) String() string { return outcomeNames[o] }

// Error codes CloudWatch and the AWS front ends answer with.
func isThrottlingCode(code string) bool {
	switch code {
	case "Throttling", "ThrottlingException", "ThrottledException", "RequestThrottledException",
		"TooManyRequestsException", "RequestLimitExceeded", "SlowDown":
		return true
	}
	return false
}

func isInvalidRequestCode(code string) bool {
	switch code {
	case "InvalidParameterValue", "InvalidParameterValueException",
		"InvalidParameterCombination", "InvalidParameterCombinationException",
		"MissingParameter", "MissingRequiredParameterException",
		"SerializationException", "ValidationError":
		return true
	}
	return false
}

func isAuthCode(code string) bool {
	switch code {
	case "AccessDenied", "AccessDeniedException", "UnrecognizedClientException",
		"InvalidClientTokenId", "ExpiredToken", "ExpiredTokenException",
		"InvalidSignatureException", "SignatureDoesNotMatch", "IncompleteSignature",
		"MissingAuthenticationToken", "RequestExpired", "NotAuthorized",
		"InvalidAccessKeyId", "InvalidToken", "TokenRefreshRequired", "AuthFailure":
		return true
	}
	return false
}

// IsTooLarge reports whether CloudWatch refused the request for its size
// (it is then split, see putSplitting).
func IsTooLarge(err error) bool {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode() == "RequestEntityTooLarge" {
		return true
	}
	var respErr *smithyhttp.ResponseError
	return errors.As(err, &respErr) && respErr.HTTPStatusCode() == http.StatusRequestEntityTooLarge
}

// RefusedAsInvalid reports whether CloudWatch refused the request for
// something in it other than its size (see isolateRejected).
func RefusedAsInvalid(err error) bool {
	return err != nil && Classify(err) == OutcomeRejected && !IsTooLarge(err)
}

// ErrorCode is the AWS error code of err, or "" when it has none.
func ErrorCode(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}

// Classify maps a PutMetricData error to what should happen next.
func Classify(err error) RequestOutcome {
	if err == nil {
		return OutcomeSuccess
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		code := apiErr.ErrorCode()
		switch {
		case isThrottlingCode(code):
			return OutcomeThrottled
		case isInvalidRequestCode(code):
			return OutcomeRejected
		case isAuthCode(code):
			return OutcomeAuthError
		}
	}
	var respErr *smithyhttp.ResponseError
	if errors.As(err, &respErr) {
		switch status := respErr.HTTPStatusCode(); {
		case status == 0: // the SDK wraps transport errors too: no answer came
			return OutcomeNetworkError
		case status == http.StatusTooManyRequests:
			return OutcomeThrottled
		case status == http.StatusUnauthorized || status == http.StatusForbidden:
			return OutcomeAuthError
		case status == http.StatusRequestEntityTooLarge:
			return OutcomeRejected
		case status >= 500:
			return OutcomeServerError
		case status >= 400:
			return OutcomeRejected
		}
		return OutcomeServerError
	}
	return OutcomeNetworkError
}

// CloudWatchPutter sends requests with the AWS SDK, bodies written by the
// exporter (requestbody.go).
type CloudWatchPutter struct {
	client *cloudwatch.Client
	bodies *BodyWriter
	// creds is the client's credentials cache: invalidated on an auth error
	// so the retry signs with freshly retrieved (e.g. rotated) credentials.
	creds *aws.CredentialsCache
	// RequestTimeout, when positive, bounds a request instead of the
	// export's deadline (see detachDeadline).
	RequestTimeout time.Duration
	// Answered, when set, records each answered request and keeps one a
	// previous process saw answered from being sent again (answered.go).
	Answered *AnsweredRequests
}

// detachDeadline returns the context of one request: it ignores ctx's
// deadline (the export's timeout) and ends after timeout instead, but still
// ends when ctx is cancelled (shutdown). A request CloudWatch answers slowly
// has most likely been stored: cutting it off at the export's deadline and
// retrying it would count its data twice.
func detachDeadline(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	stop := context.AfterFunc(ctx, func() {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			cancel()
		}
	})
	return rctx, func() { stop(); cancel() }
}

// LoadAWSConfig resolves region and credentials from the standard chain,
// the profile and the role to assume. The SDK's own retries are off:
// exporterhelper retries, and only what failed.
func LoadAWSConfig(ctx context.Context, cfg AWSSource) (aws.Config, error) {
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} }),
	}
	if cfg.Region != "" {
		opts = append(opts, awsconfig.WithRegion(cfg.Region))
	}
	if cfg.Profile != "" {
		opts = append(opts, awsconfig.WithSharedConfigProfile(cfg.Profile))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("loading AWS configuration: %w", err)
	}
	if cfg.RoleARN != "" {
		provider := stscreds.NewAssumeRoleProvider(sts.NewFromConfig(awsCfg), cfg.RoleARN,
			func(o *stscreds.AssumeRoleOptions) { o.RoleSessionName = "otelcol-cloudwatch-exporter" })
		awsCfg.Credentials = aws.NewCredentialsCache(provider)
	}
	return awsCfg, nil
}

// NewCloudWatchPutter returns the putter of a CloudWatch client made from awsCfg.
func NewCloudWatchPutter(awsCfg aws.Config, endpoint string) *CloudWatchPutter {
	client := cloudwatch.NewFromConfig(awsCfg, func(o *cloudwatch.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		o.Retryer = aws.NopRetryer{}
		o.HTTPClient = answerRecorder{next: o.HTTPClient}
	})
	creds, _ := awsCfg.Credentials.(*aws.CredentialsCache)
	p := NewPutter(client)
	p.creds = creds
	return p
}

// NewPutter returns the putter of client.
func NewPutter(client *cloudwatch.Client) *CloudWatchPutter {
	return &CloudWatchPutter{client: client, bodies: NewBodyWriter(ScratchKeep)}
}

// sendPreparedBody makes a call send the body in its context.
func sendPreparedBody(o *cloudwatch.Options) {
	o.Protocol = presetBodyProtocol{o.Protocol}
	// The prepared bodies are gzipped already, with a reused writer.
	o.DisableRequestCompression = true
}

// Put sends one request.
func (p *CloudWatchPutter) Put(ctx context.Context, namespace string, datums []translate.Datum) error {
	if p.RequestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = detachDeadline(ctx, p.RequestTimeout)
		defer cancel()
	}
	if p.creds != nil {
		// A failed lookup is not a request CloudWatch answered: retry it.
		if _, err := p.creds.Retrieve(ctx); err != nil {
			return fmt.Errorf("%w: AWS credentials unavailable: %w", ErrNotSent, err)
		}
	}
	body, err := p.bodies.Prepare(namespace, datums)
	if err != nil {
		return err
	}
	if p.Answered.seen(body.hash, len(datums)) {
		p.bodies.Release(body)
		return nil
	}
	// answerRecorder records the request as answered once its status
	// arrives.
	body.Body.hash, body.Body.answered = body.hash, p.Answered
	ctx = context.WithValue(ctx, preparedBodyKey{}, &body.Body)
	_, err = p.client.PutMetricData(ctx, &cloudwatch.PutMetricDataInput{Namespace: &namespace}, sendPreparedBody)
	if err == nil {
		// Answered: the body was read to the end. After an error the
		// transport may still be reading it; those buffers are not reused.
		p.bodies.Release(body)
	}
	if p.creds != nil && Classify(err) == OutcomeAuthError {
		p.creds.Invalidate()
	}
	return err
}
