// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter"

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

// putter sends one PutMetricData request.
type putter interface {
	put(ctx context.Context, namespace string, datums []translate.Datum) error
}

// requestOutcome classifies how a request ended; it is the `outcome`
// attribute of the requests telemetry counter.
type requestOutcome uint8

const (
	outcomeSuccess      requestOutcome = iota
	outcomeThrottled                   // retry after a delay
	outcomeServerError                 // 5xx: retry
	outcomeNetworkError                // no answer: retry
	outcomeAuthError                   // credentials refused: retry (they may be refreshed or fixed)
	outcomeRejected                    // the request is invalid: never retry it
	numOutcomes
)

var outcomeNames = [numOutcomes]string{
	outcomeSuccess:      "success",
	outcomeThrottled:    "throttled",
	outcomeServerError:  "server_error",
	outcomeNetworkError: "network_error",
	outcomeAuthError:    "auth_error",
	outcomeRejected:     "rejected",
}

func (o requestOutcome) String() string { return outcomeNames[o] }

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

// isTooLarge reports whether CloudWatch refused the request for its size
// (it is then split, see putSplitting).
func isTooLarge(err error) bool {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode() == "RequestEntityTooLarge" {
		return true
	}
	var respErr *smithyhttp.ResponseError
	return errors.As(err, &respErr) && respErr.HTTPStatusCode() == http.StatusRequestEntityTooLarge
}

// refusedAsInvalid reports whether CloudWatch refused the request for
// something in it other than its size (see isolateRejected).
func refusedAsInvalid(err error) bool {
	return err != nil && classify(err) == outcomeRejected && !isTooLarge(err)
}

// errorCode is the AWS error code of err, or "" when it has none.
func errorCode(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}

// classify maps a PutMetricData error to what should happen next.
func classify(err error) requestOutcome {
	if err == nil {
		return outcomeSuccess
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		code := apiErr.ErrorCode()
		switch {
		case isThrottlingCode(code):
			return outcomeThrottled
		case isInvalidRequestCode(code):
			return outcomeRejected
		case isAuthCode(code):
			return outcomeAuthError
		}
	}
	var respErr *smithyhttp.ResponseError
	if errors.As(err, &respErr) {
		switch status := respErr.HTTPStatusCode(); {
		case status == 0: // the SDK wraps transport errors too: no answer came
			return outcomeNetworkError
		case status == http.StatusTooManyRequests:
			return outcomeThrottled
		case status == http.StatusUnauthorized || status == http.StatusForbidden:
			return outcomeAuthError
		case status == http.StatusRequestEntityTooLarge:
			return outcomeRejected
		case status >= 500:
			return outcomeServerError
		case status >= 400:
			return outcomeRejected
		}
		return outcomeServerError
	}
	return outcomeNetworkError
}

// cloudWatchPutter sends requests with the AWS SDK, bodies written by the
// exporter (requestbody.go).
type cloudWatchPutter struct {
	client *cloudwatch.Client
	bodies *bodyWriter
	// creds is the client's credentials cache: invalidated on an auth error
	// so the retry signs with freshly retrieved (e.g. rotated) credentials.
	creds *aws.CredentialsCache
	// requestTimeout, when positive, bounds a request instead of the
	// export's deadline (see detachDeadline).
	requestTimeout time.Duration
	// answered, when set, records each answered request and keeps one a
	// previous process saw answered from being sent again (answered.go).
	answered *answeredRequests
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

// loadAWSConfig resolves region and credentials from the standard chain,
// the profile and the role to assume. The SDK's own retries are off:
// exporterhelper retries, and only what failed.
func loadAWSConfig(ctx context.Context, cfg *Config) (aws.Config, error) {
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

func newCloudWatchPutter(awsCfg aws.Config, endpoint string) *cloudWatchPutter {
	client := cloudwatch.NewFromConfig(awsCfg, func(o *cloudwatch.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		o.Retryer = aws.NopRetryer{}
		o.HTTPClient = answerRecorder{next: o.HTTPClient}
	})
	creds, _ := awsCfg.Credentials.(*aws.CredentialsCache)
	p := newPutter(client)
	p.creds = creds
	return p
}

func newPutter(client *cloudwatch.Client) *cloudWatchPutter {
	return &cloudWatchPutter{client: client, bodies: newBodyWriter(scratchKeep)}
}

// sendPreparedBody makes a call send the body in its context.
func sendPreparedBody(o *cloudwatch.Options) {
	o.Protocol = presetBodyProtocol{o.Protocol}
	// The prepared bodies are gzipped already, with a reused writer.
	o.DisableRequestCompression = true
}

func (p *cloudWatchPutter) put(ctx context.Context, namespace string, datums []translate.Datum) error {
	if p.requestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = detachDeadline(ctx, p.requestTimeout)
		defer cancel()
	}
	if p.creds != nil {
		// A failed lookup is not a request CloudWatch answered: retry it.
		if _, err := p.creds.Retrieve(ctx); err != nil {
			return fmt.Errorf("%w: AWS credentials unavailable: %w", errNotSent, err)
		}
	}
	body, err := p.bodies.prepare(namespace, datums)
	if err != nil {
		return err
	}
	if p.answered.seen(body.hash, len(datums)) {
		p.bodies.release(body)
		return nil
	}
	// answerRecorder records the request as answered once its status
	// arrives.
	body.body.hash, body.body.answered = body.hash, p.answered
	ctx = context.WithValue(ctx, preparedBodyKey{}, &body.body)
	_, err = p.client.PutMetricData(ctx, &cloudwatch.PutMetricDataInput{Namespace: &namespace}, sendPreparedBody)
	if err == nil {
		// Answered: the body was read to the end. After an error the
		// transport may still be reading it; those buffers are not reused.
		p.bodies.release(body)
	}
	if p.creds != nil && classify(err) == outcomeAuthError {
		p.creds.Invalidate()
	}
	return err
}
