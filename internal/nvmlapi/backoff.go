// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package nvmlapi // import "github.com/gpubuild/otelcol-gpubuild/internal/nvmlapi"

import (
	"fmt"
	"time"
)

// The defaults of init_retry_interval and init_retry_max_interval, the
// same for the nvml receiver and the nvml_sampler extension: a host
// without a driver tries 1, 2, 4, 8 min apart, then every 15 min.
const (
	DefaultInitRetryInterval    = time.Minute
	DefaultInitRetryMaxInterval = 15 * time.Minute
)

// InitBackoff paces the attempts to load NVML (or to find a GPU) after
// failures: a host without a driver should not wake every minute for good.
// The zero value with Initial and Max set is ready to use.
type InitBackoff struct {
	Initial time.Duration // the wait after the first failure: init_retry_interval
	Max     time.Duration // the longest wait: init_retry_max_interval
	wait    time.Duration
}

// Failed returns the wait before the next attempt: Initial after the first
// consecutive failure, then doubling, capped at Max.
func (b *InitBackoff) Failed() time.Duration {
	limit := max(b.Max, b.Initial) // a Max below Initial (unvalidated) is a fixed interval
	d := b.wait
	if d == 0 {
		d = b.Initial
	}
	d = min(d, limit)
	if d > limit/2 {
		b.wait = limit
	} else {
		b.wait = 2 * d
	}
	return d
}

// Reset starts the schedule again at Initial: NVML loaded and found a GPU.
func (b *InitBackoff) Reset() { b.wait = 0 }

// ValidateInitRetry checks init_retry_interval and init_retry_max_interval,
// which the nvml receiver and the nvml_sampler extension both have; each
// error names its field.
func ValidateInitRetry(interval, maxInterval time.Duration) []error {
	var errs []error
	if interval <= 0 {
		errs = append(errs, fmt.Errorf("init_retry_interval: must be positive, got %s", interval))
	}
	switch {
	case maxInterval <= 0:
		errs = append(errs, fmt.Errorf("init_retry_max_interval: must be positive, got %s", maxInterval))
	case maxInterval < interval:
		errs = append(errs, fmt.Errorf("init_retry_max_interval: must be at least init_retry_interval (%s), got %s", interval, maxInterval))
	}
	return errs
}
