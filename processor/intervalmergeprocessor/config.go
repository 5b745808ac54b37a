// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package intervalmergeprocessor // import "github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor"

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/confmap"
)

// Config of the intervalmerge processor.
type Config struct {
	// Interval is how long data is merged before it is handed on.
	Interval time.Duration `mapstructure:"interval"`
	// DropResourceAttributes are the resource attributes that tell workers
	// apart; they are removed from summable (delta sum and delta histogram)
	// metrics so that every worker's series of the same name, unit and
	// attributes merge.
	DropResourceAttributes []string `mapstructure:"drop_resource_attributes"`
	// KeepPerWorker names summable metrics that stay per worker anyway.
	// Gauges, cumulative sums, exponential histograms and summaries always
	// stay per worker.
	KeepPerWorker []string `mapstructure:"keep_per_worker"`
	// State is where requests are written before they are acknowledged,
	// and the identities of the requests merged.
	State StateConfig `mapstructure:"state"`
	// IdentityTTL is how long the identities of one sidecar process's
	// requests are remembered after its last request: longer than any
	// sidecar retries a request (its outage plus its retry backoff).
	IdentityTTL time.Duration `mapstructure:"identity_ttl"`
	// MaxAhead and MaxAge bound a point's timestamp against the gateway's
	// clock; a point outside them is refused at receipt (counted, logged
	// with its worker's resource), the rest of the request is taken.
	MaxAhead time.Duration `mapstructure:"max_ahead"`
	MaxAge   time.Duration `mapstructure:"max_age"`
	// MaxPoints bounds the open interval in memory: it is handed on early
	// when it holds this many data points (merged series and points kept
	// per worker), and requests are refused with a retryable error while it
	// holds twice as many (the hand-over is stuck).
	MaxPoints int `mapstructure:"max_points"`

	// legacyJournalKey: the configuration set journal (Unmarshal).
	legacyJournalKey bool

	// prevent unkeyed literal initialization
	_ struct{}
}

// StateConfig is the gateway's state: its receipt journal and identities
// are files of their own (internal/receipts, internal/identities), not
// entries of a storage extension.
type StateConfig struct {
	// Journal is where requests are written before they are acknowledged.
	Journal JournalConfig `mapstructure:"journal"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// JournalConfig says where received requests are written.
type JournalConfig struct {
	// Directory holds the journal of received requests and the identities
	// of the requests merged. Empty: no journal, and a request is
	// acknowledged only once its interval was handed on (each sender is
	// then limited to its consumers' count of requests per interval).
	Directory string `mapstructure:"directory"`
	// Fsync flushes each request to disk before it is acknowledged (power
	// loss); without it a request survives a killed process.
	Fsync bool `mapstructure:"fsync"`
	// MaxBytes bounds the journal on disk: the open interval and those the
	// next consumer refused (a full queue, a failing disk). Past it requests
	// are refused with a retryable error and stay in the senders' queues.
	MaxBytes int64 `mapstructure:"max_bytes"`

	// prevent unkeyed literal initialization
	_ struct{}
}

func createDefaultConfig() *Config {
	return &Config{
		Interval: 60 * time.Second,
		DropResourceAttributes: []string{
			"service.instance.id", "host.name", "host.id", "host.ip",
			"k8s.pod.name", "k8s.pod.uid", "k8s.pod.ip", "container.id", "process.pid",
		},
		State:       StateConfig{Journal: JournalConfig{MaxBytes: 256 << 20}},
		IdentityTTL: 24 * time.Hour,
		// CloudWatch takes points up to two hours ahead and two weeks old.
		MaxAhead: 2 * time.Hour,
		MaxAge:   13 * 24 * time.Hour,
		// A point kept per worker costs about 1 KiB of resident memory with
		// the garbage of its request (BENCHMARKS.md): some 150 MiB.
		MaxPoints: 150_000,
	}
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	if c.Interval <= 0 {
		errs = append(errs, fmt.Errorf("interval: must be positive, got %v", c.Interval))
	}
	for i, a := range c.DropResourceAttributes {
		if a == "" {
			errs = append(errs, fmt.Errorf("drop_resource_attributes[%d]: empty attribute name", i))
		}
	}
	for i, n := range c.KeepPerWorker {
		if n == "" {
			errs = append(errs, fmt.Errorf("keep_per_worker[%d]: empty metric name", i))
		}
	}
	if c.State.Journal.MaxBytes <= 0 {
		errs = append(errs, fmt.Errorf("state.journal.max_bytes: must be positive, got %d", c.State.Journal.MaxBytes))
	}
	if c.IdentityTTL <= 0 {
		errs = append(errs, fmt.Errorf("identity_ttl: must be positive, got %v", c.IdentityTTL))
	}
	if c.MaxAhead <= 0 {
		errs = append(errs, fmt.Errorf("max_ahead: must be positive, got %v", c.MaxAhead))
	}
	if c.MaxAge <= 0 {
		errs = append(errs, fmt.Errorf("max_age: must be positive, got %v", c.MaxAge))
	}
	if c.MaxPoints <= 0 {
		errs = append(errs, fmt.Errorf("max_points: must be positive, got %d", c.MaxPoints))
	}
	return errors.Join(errs...)
}

// legacyJournalKey is where an earlier release read the journal's settings.
const legacyJournalKey = "journal"

// Unmarshal reads the configuration, taking an earlier release's journal
// block as state.journal (Start warns about it).
func (c *Config) Unmarshal(conf *confmap.Conf) error {
	if conf.IsSet(legacyJournalKey) {
		if conf.IsSet("state::journal") {
			return errors.New(legacyJournalKey + ": set state.journal instead (both are set)")
		}
		m := conf.ToStringMap()
		st, _ := m["state"].(map[string]any)
		if st == nil {
			st = map[string]any{}
		}
		st["journal"] = m[legacyJournalKey]
		m["state"] = st
		delete(m, legacyJournalKey)
		conf = confmap.NewFromStringMap(m)
		c.legacyJournalKey = true
	}
	// plain has Config's fields without this method.
	type plain Config
	return conf.Unmarshal((*plain)(c))
}
