// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter"

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
	// credentialsBackoff is the first wait between lookups, doubled up to
	// credentialsMaxBackoff.
	credentialsBackoff    = time.Second
	credentialsMaxBackoff = 30 * time.Second
)

// credentialSourceConfigured reports whether the configuration or the
// environment names a credentials source (static keys, a container
// credentials endpoint, web identity, a profile, shared config files, a role
// to assume). With one, a lookup that fails is a fault to retry, never a
// reason for a dry run.
func credentialSourceConfigured(cfg *Config, getenv func(string) string) bool {
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

// autoState is what output_destination auto has decided.
type autoState int32

const (
	autoPending    autoState = iota // still looking: requests are held (retried)
	autoCloudWatch                  // credentials found: send
	autoDryRun                      // nothing configured and nothing found: print
)

// errCredentialsPending is answered while auto has not decided; the request
// is not sent, and the data stays in the sending queue to be retried.
var errCredentialsPending = fmt.Errorf("%w: output_destination auto is still looking for AWS credentials", errNotSent)

// autoPutter sends to CloudWatch or prints, once a credentials lookup gave a
// definite answer; until then every request fails as retryable.
type autoPutter struct {
	state      atomic.Int32
	cloudWatch putter
	dryRun     putter
}

func (p *autoPutter) put(ctx context.Context, namespace string, datums []translate.Datum) error {
	switch autoState(p.state.Load()) {
	case autoCloudWatch:
		return p.cloudWatch.put(ctx, namespace, datums)
	case autoDryRun:
		return p.dryRun.put(ctx, namespace, datums)
	}
	return errCredentialsPending
}

// credentialsResolver looks credentials up in the background with backoff
// until it has a definite answer, and calls decide with it once.
type credentialsResolver struct {
	creds      aws.CredentialsProvider
	configured bool // a source is configured: keep trying, never a dry run
	logger     *zap.Logger
	decide     func(autoState)
	// first wait between attempts; doubled up to credentialsMaxBackoff
	backoff time.Duration

	cancel context.CancelFunc
	done   sync.WaitGroup
}

// resolve makes the first lookup in the caller (bounded by
// firstAttemptTimeout) and, without a definite answer, goes on in the background.
func (r *credentialsResolver) resolve(ctx context.Context) {
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
func (r *credentialsResolver) attempt(ctx context.Context, timeout time.Duration, n int) error {
	actx, cancel := context.WithTimeout(ctx, timeout)
	creds, err := r.creds.Retrieve(actx)
	cancel()
	if err == nil && !creds.HasKeys() {
		err = errors.New("credentials without keys")
	}
	if err != nil {
		return err
	}
	if n > 1 {
		r.logger.Info("AWS credentials found: sending to CloudWatch what was held in the sending queue",
			zap.String("credentials_source", creds.Source), zap.Int("attempt", n))
	}
	r.decide(autoCloudWatch)
	return nil
}

func (r *credentialsResolver) stop() {
	if r.cancel != nil {
		r.cancel()
		r.done.Wait()
	}
}

// run goes on after a first failed lookup (err) until a definite answer.
func (r *credentialsResolver) run(ctx context.Context, err error) {
	wait := r.backoff
	for n := 1; ; n++ {
		if !r.configured && n >= imdsAttempts {
			r.decide(autoDryRun)
			return
		}
		r.logger.Warn("AWS credentials lookup failed; data is held in the sending queue and the lookup retried",
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
