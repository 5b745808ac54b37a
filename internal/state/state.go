// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package state is how every stateful component of the distribution keeps
// its state across restarts: one configuration shape (state.storage, a
// file_storage extension, and state.journal, an append-only journal in
// front of it), one Open that finds the storage and opens the journal, one
// warning when the state is kept in memory only, and (in its subpackages)
// one record framing and one field encoding for every persisted format.
//
// To give a component persisted state: embed Config in its state settings
// (`mapstructure:",squash"`), call Config.Problems from Validate, call Open
// in Start when Storage is set and WarnInMemory when it is not, write and
// read the client Open returns, and close it in Shutdown.
package state // import "github.com/gpubuild/otelcol-gpubuild/internal/state"

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/internal/state/journal"
)

// Config says where a component keeps its state.
type Config struct {
	// Storage is the storage extension (file_storage) that holds the
	// state; unset keeps it in memory only.
	Storage *component.ID `mapstructure:"storage"`
	// Journal, when its directory is set, appends each batch of writes to
	// a journal file and writes the storage once per checkpoint interval.
	Journal journal.Config `mapstructure:"journal"`
}

// DefaultConfig is in memory until a storage is named, and without a
// journal until its directory is named.
func DefaultConfig() Config {
	return Config{Journal: journal.Config{CheckpointInterval: journal.DefaultCheckpointInterval}}
}

// Problems checks the settings configured at field (such as "state"), each
// error naming its field.
func (cfg Config) Problems(field string) []error {
	return cfg.Journal.Problems(field+".journal", field+".storage", cfg.Storage != nil)
}

// Owner says whose state Open opens.
type Owner struct {
	Kind component.Kind
	ID   component.ID
	// Client names the component's client of the storage extension
	// (file_storage keeps it in the file <kind>_<type>_<name>_<client>).
	Client string
	// Field is where the settings are configured ("state"), for errors.
	Field string
	// What names the state in log lines ("derivation state").
	What   string
	Logger *zap.Logger
}

// Store is a component's opened state.
type Store struct {
	// Client is the storage client, the journal in front of it when one
	// is configured.
	Client storage.Client
	// Journal is the journal, nil without one.
	Journal *journal.Client
	// Location says where the state is, for log lines.
	Location string
}

// Open looks up cfg.Storage (which must be set) on the host, gets the
// owner's client of it and, when a journal is configured, opens the journal
// in front of it after writing into the storage what a previous process
// left in the journal.
func Open(ctx context.Context, host component.Host, cfg Config, o Owner) (*Store, error) {
	if cfg.Storage == nil {
		return nil, errors.New(o.Field + ".storage: not set")
	}
	ext, ok := host.GetExtensions()[*cfg.Storage]
	if !ok {
		return nil, fmt.Errorf("%s.storage: no extension %q is configured", o.Field, cfg.Storage)
	}
	se, ok := ext.(storage.Extension)
	if !ok {
		return nil, fmt.Errorf("%s.storage: extension %q is not a storage extension", o.Field, cfg.Storage)
	}
	client, err := se.GetClient(ctx, o.Kind, o.ID, o.Client)
	if err != nil {
		return nil, fmt.Errorf("%s.storage: %w", o.Field, err)
	}
	st := &Store{Client: client, Location: fmt.Sprintf("%s (file %s)", cfg.Storage, journal.StorageClientName(o.Kind, o.ID, o.Client))}
	if cfg.Journal.Directory == "" {
		return st, nil
	}
	jc, path, err := journal.OpenFor(ctx, client, cfg.Journal, o.Kind, o.ID, o.Client, o.Field+".journal", o.What, o.Logger)
	if err != nil {
		_ = client.Close(ctx)
		return nil, err
	}
	st.Client, st.Journal = jc, jc
	st.Location += " with journal " + path
	return st, nil
}

// WarnInMemory says, once at start, that a component's state is kept in
// memory only, what a restart then does (consequence), and the setting
// that keeps it.
func WarnInMemory(logger *zap.Logger, what, field, consequence string, fields ...zap.Field) {
	logger.Warn("The "+what+" is kept in memory only: "+consequence+
		"; set "+field+".storage to a file_storage extension (as otelcol-config.yaml does) to keep it across restarts", fields...)
}

// WarnRenamed says, once at start, that a configuration key an earlier
// release read is still read, and under which key it belongs now.
func WarnRenamed(logger *zap.Logger, old, now string) {
	logger.Warn("The setting " + old + " is read as " + now + " for this release only: rename it to " + now)
}
