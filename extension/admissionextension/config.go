// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package admissionextension // import "github.com/gpubuild/otelcol-gpubuild/extension/admissionextension"

import (
	"errors"
	"time"
)

// Config bounds the requests in flight, and the Go heap they may enter.
type Config struct {
	// MaxInFlight is how many requests are read, decoded and processed at
	// once, across all connections and both protocols.
	MaxInFlight int `mapstructure:"max_in_flight"`
	// MaxWaiting is how many more HTTP requests may wait for a place; past
	// it a request is refused at once (503; clients retry). A gRPC request
	// never waits: without a free place it is refused with UNAVAILABLE.
	MaxWaiting int `mapstructure:"max_waiting"`
	// WaitTimeout is the longest a request waits for a place before it is refused.
	WaitTimeout time.Duration `mapstructure:"wait_timeout"`
	// Memory refuses requests while the Go heap is high (memory_limiter's
	// check, done when a request arrives instead of on a timer).
	Memory MemoryConfig `mapstructure:"memory"`
}

// MemoryConfig mirrors memory_limiter's settings. LimitMiB 0: no check.
type MemoryConfig struct {
	// LimitMiB is the hard limit on the heap: above it a collection is forced.
	LimitMiB uint32 `mapstructure:"limit_mib"`
	// SpikeLimitMiB: requests are refused at or above LimitMiB - SpikeLimitMiB
	// (0: 20 % of LimitMiB, as memory_limiter).
	SpikeLimitMiB uint32 `mapstructure:"spike_limit_mib"`
	// CheckInterval: the heap is read when a request arrives, at most once
	// per CheckInterval (the reading serves the requests in between), and
	// never while none arrives.
	CheckInterval time.Duration `mapstructure:"check_interval"`
	// MinGCIntervalWhenSoftLimited, MinGCIntervalWhenHardLimited: the least
	// time between forced collections at or above the soft and hard limits.
	MinGCIntervalWhenSoftLimited time.Duration `mapstructure:"min_gc_interval_when_soft_limited"`
	MinGCIntervalWhenHardLimited time.Duration `mapstructure:"min_gc_interval_when_hard_limited"`
}

// Validate checks the configuration.
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.MaxInFlight <= 0 {
		errs = append(errs, errors.New("max_in_flight: must be positive"))
	}
	if cfg.MaxWaiting < 0 {
		errs = append(errs, errors.New("max_waiting: must not be negative"))
	}
	if cfg.WaitTimeout < 0 {
		errs = append(errs, errors.New("wait_timeout: must not be negative"))
	}
	m := cfg.Memory
	if m.LimitMiB > 0 && m.SpikeLimitMiB >= m.LimitMiB {
		errs = append(errs, errors.New("memory.spike_limit_mib: must be less than memory.limit_mib"))
	}
	if m.CheckInterval < 0 {
		errs = append(errs, errors.New("memory.check_interval: must not be negative"))
	}
	if m.MinGCIntervalWhenHardLimited < 0 {
		errs = append(errs, errors.New("memory.min_gc_interval_when_hard_limited: must not be negative"))
	}
	if m.MinGCIntervalWhenSoftLimited < m.MinGCIntervalWhenHardLimited {
		errs = append(errs, errors.New("memory.min_gc_interval_when_soft_limited: must not be less than memory.min_gc_interval_when_hard_limited"))
	}
	return errors.Join(errs...)
}
