// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/internal/state"
	"github.com/gpubuild/otelcol-gpubuild/internal/state/journal"
)

// StateConfig says where the derivation keeps its state (the run memory and
// the derived counts not yet accepted by the next consumer) so that a
// restarted or killed collector neither loses nor repeats a count.
type StateConfig struct {
	// Storage and Journal: where the state is kept (internal/state).
	state.Config `mapstructure:",squash"`
	// MaxBytes bounds the persisted run memory; beyond it the oldest
	// counted runs are forgotten (counted and logged).
	MaxBytes int64 `mapstructure:"max_bytes"`
	// ExpiryMargin: a run not updated for job_timeout plus this margin is
	// not restored at start (the collector was down longer than that).
	ExpiryMargin time.Duration `mapstructure:"expiry_margin"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// DefaultStateConfig is in memory until a storage is named, with 32 MiB of run
// memory (about 150,000 runs); 10 minutes of margin; no journal until its
// directory is named.
func DefaultStateConfig() StateConfig {
	return StateConfig{Config: state.DefaultConfig(), MaxBytes: 32 << 20, ExpiryMargin: 10 * time.Minute}
}

// Problems checks the state settings, each error naming its field.
func (cfg *StateConfig) Problems() []error {
	var errs []error
	if cfg.MaxBytes <= 0 {
		errs = append(errs, errors.New("state.max_bytes: must be positive"))
	}
	if cfg.ExpiryMargin < 0 {
		errs = append(errs, errors.New("state.expiry_margin: must not be negative"))
	}
	return append(errs, cfg.Config.Problems("state")...)
}

// stateClientName names the connector's client of the storage extension;
// file_storage keeps it in the file connector_<type>_<name>_derivation.
const stateClientName = "derivation"

// Reasons a persisted entry is skipped at start.
type stateSkipReason uint8

const (
	stateSkipUnknownVersion stateSkipReason = iota
	stateSkipCorrupted
	stateSkipMissingResource
	numStateSkipReasons
)

var stateSkipReasonNames = [numStateSkipReasons]string{
	stateSkipUnknownVersion:  "unknown_version",
	stateSkipCorrupted:       "corrupted",
	stateSkipMissingResource: "missing_resource",
}

func (r stateSkipReason) String() string { return stateSkipReasonNames[r] }

// derivationState writes the derivation's state to a storage client, batched
// per request: the entries the request changed, in one transaction, before
// the request is acknowledged. It is used under the emitter's lock.
type derivationState struct {
	client   storage.Client
	cfg      StateConfig
	location string // for log messages: extension and file
	logger   *zap.Logger
	// journal is client when state.journal is set; its checkpoint errors
	// are reported once each.
	journal           *journal.Client
	lastCheckpointErr error

	// resources already written, by key.
	resources map[string]bool
	// bytes of persisted job entries (each job's own in its Stored).
	totalJobs  int64
	nextID     uint64 // next series entry id
	nextJobSeq uint64 // next job entry's place in the key order

	// ops is the batch being written (ptrs points at them); inBuf its
	// operations whose keys or values lie in buf.
	ops     []storage.Operation
	ptrs    []*storage.Operation
	inBuf   []bufOp
	deletes []string // series entries to delete with the next write
	// joined holds the cumulative tracker's operations, written with the
	// next batch (batchJoiner).
	joined []*storage.Operation
	buf    []byte
}

// openState gets the storage client and loads what a previous process
// saved into d.
func openState(ctx context.Context, host component.Host, owner component.ID, kind component.Kind, cfg StateConfig, d *deriver, now time.Time, logger *zap.Logger) (*derivationState, error) {
	opened, err := state.Open(ctx, host, cfg.Config, state.Owner{
		Kind: kind, ID: owner, Client: stateClientName,
		Field: "state", What: "derivation state", Logger: logger,
	})
	if err != nil {
		return nil, err
	}
	client := opened.Client
	st := &derivationState{
		client:     client,
		journal:    opened.Journal,
		cfg:        cfg,
		location:   opened.Location,
		logger:     logger,
		resources:  map[string]bool{},
		nextID:     1,
		nextJobSeq: 1,
	}
	if st.journal != nil {
		// A batch writes a few jobs, most of them again within the
		// checkpoint interval: the checkpoint reads only their last
		// entries.
		st.journal.IndexAppends()
	}
	// Tracking is on while loading: what the load merges or trims is
	// written with the first batch.
	d.state = st
	if d.jobs != nil {
		d.jobs.Track()
	}
	if err := st.load(ctx, d, now, logger); err != nil {
		d.state, d.dirtySeries = nil, nil
		if d.jobs != nil {
			d.jobs.Untrack()
		}
		_ = client.Close(ctx)
		return nil, err
	}
	return st, nil
}

// resourceKey returns the key of res's entry, writing it with the next
// batch when it is new.
func (st *derivationState) resourceKey(res *resourceEntry) string {
	if res.stateKey == "" {
		res.stateEncoded = encodeAttributes(res.attrs)
		res.stateKey = resourceStateKey(res.stateEncoded)
	}
	if !st.resources[res.stateKey] {
		st.resources[res.stateKey] = true
		st.ops = append(st.ops, storage.Operation{Type: storage.Set, Key: res.stateKey, Value: encodeResource(res.stateEncoded)})
	}
	return res.stateKey
}

func (st *derivationState) close(ctx context.Context) error {
	return st.client.Close(ctx)
}
