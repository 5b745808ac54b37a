// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package send // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/send"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"
	"go.uber.org/zap"
)

// How output_destination auto looks for credentials when no source is
// configured and only the instance metadata service could answer.
const (
	// imdsAttemptTimeout bounds one lookup; the SDK's metadata client retries
	// inside it.
	imdsAttemptTimeout = 5 * time.Second
	// imdsAttempts lookups fail before auto settles on a dry run.
	imdsAttempts = 3
	// firstAttemptTimeout bounds the lookup Start waits for: credentials at
	// hand (keys in the environment, a fast endpoint) decide at once; a slower
	// lookup goes on in the background.
	firstAttemptTimeout = 1500 * time.Millisecond
	// CredentialsBackoff is the first wait between lookups, doubled up to
	// credentialsMaxBackoff.
	CredentialsBackoff    = time.Second
	credentialsMaxBackoff = 30 * time.Second
)

// CredentialSourceConfigured reports whether the configuration or the
// environment names a credentials source (static keys, a container
// credentials endpoint, web identity, a profile, shared config files, a role
// to assume). With one, a lookup that fails is a fault to retry, never a
// reason for a dry run.
func CredentialSourceConfigured(cfg AWSSource, getenv func(string) string) bool {
	if cfg.Profile != "" || cfg.RoleARN != "" {
		return true
	}
	for _, k := range []string{
		"AWS_ACCESS_KEY_ID", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_PROFILE",
	} {
		if getenv(k) != "" {
			return true
		}
	}
	home, _ := os.UserHomeDir()
	for _, f := range []struct{ env, def string }{
		{"AWS_SHARED_CREDENTIALS_FILE", filepath.Join(home, ".aws", "credentials")},
		{"AWS_CONFIG_FILE", filepath.Join(home, ".aws", "config")},
	} {
		path := getenv(f.env)
		if path == "" {
			if home == "" {
				continue
			}
			path = f.def
		}
		if st, err := os.Stat(path); err == nil && st.Size() > 0 {
			return true
		}
	}
	return false
}

// AutoState is what output_destination auto has decided.
type AutoState int32

// What auto can have decided.
const (
	autoPending    AutoState = iota // still looking: requests are held (retried)
	autoCloudWatch                  // credentials found: send
	AutoDryRun                      // nothing configured and nothing found: print
)

// errCredentialsPending is answered while auto has not decided; the request
// is not sent, and the data stays in the sending queue to be retried.
var errCredentialsPending = fmt.Errorf("%w: output_destination auto is still looking for AWS credentials", ErrNotSent)

// AutoPutter sends to CloudWatch or prints, once a credentials lookup gave a
// definite answer; until then every request fails as retryable.
type AutoPutter struct {
	State      atomic.Int32
	CloudWatch Putter
	DryRun     Putter
}

// Put sends or prints datums once auto has decided.
func (p *AutoPutter) Put(ctx context.Context, namespace string, datums []translate.Datum) error {
	switch AutoState(p.State.Load()) {
	case autoCloudWatch:
		return p.CloudWatch.Put(ctx, namespace, datums)
	case AutoDryRun:
		return p.DryRun.Put(ctx, namespace, datums)
	}
	return errCredentialsPending
}

// CredentialsResolver looks credentials up in the background with backoff
// until it has a definite answer, and calls decide with it once.
type CredentialsResolver struct {
	Creds      aws.CredentialsProvider
	Configured bool // a source is configured: keep trying, never a dry run
	Logger     *zap.Logger
	Decide     func(AutoState)
	// first wait between attempts; doubled up to credentialsMaxBackoff
	Backoff time.Duration

	cancel context.CancelFunc
	done   sync.WaitGroup
}

// Resolve makes the first lookup in the caller (bounded by
// firstAttemptTimeout) and, without a definite answer, goes on in the background.
func (r *CredentialsResolver) Resolve(ctx context.Context) {
	err := r.attempt(ctx, firstAttemptTimeout, 1)
	if err == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.done.Add(1)
	go func() {
		defer r.done.Done()
		r.run(ctx, err)
	}()
}

// attempt looks credentials up once; it calls decide with CloudWatch when it
// finds them (the error is nil then).
func (r *CredentialsResolver) attempt(ctx context.Context, timeout time.Duration, n int) error {
	actx, cancel := context.WithTimeout(ctx, timeout)
	creds, err := r.Creds.Retrieve(actx)
	cancel()
	if err == nil && !creds.HasKeys() {
		err = errors.New("credentials without keys")
	}
	if err != nil {
		return err
	}
	if n > 1 {
		r.Logger.Info("AWS credentials found: sending to CloudWatch what was held in the sending queue",
			zap.String("credentials_source", creds.Source), zap.Int("attempt", n))
	}
	r.Decide(autoCloudWatch)
	return nil
}

// Stop stops the background lookup.
func (r *CredentialsResolver) Stop() {
	if r.cancel != nil {
		r.cancel()
		r.done.Wait()
	}
}

// run goes on after a first failed lookup (err) until a definite answer.
func (r *CredentialsResolver) run(ctx context.Context, err error) {
	wait := r.Backoff
	for n := 1; ; n++ {
		if !r.Configured && n >= imdsAttempts {
			r.Decide(AutoDryRun)
			return
		}
		r.Logger.Warn("AWS credentials lookup failed; data is held in the sending queue and the lookup retried",
			zap.Int("attempt", n), zap.Duration("retry_in", wait), zap.Error(err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, credentialsMaxBackoff)
		if err = r.attempt(ctx, imdsAttemptTimeout, n+1); err == nil || ctx.Err() != nil {
			return
		}
	}
}
