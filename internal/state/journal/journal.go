// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package journal puts an append-only journal in front of a storage
// client (file_storage's bbolt file): a batch of sets and deletes is one
// record appended to a file with one write, and the storage receives the
// net effect of the journal (each key's last operation) every checkpoint
// interval, in one transaction per 256 KiB of those keys and values.
//
// A state that must be written before each OTLP request is acknowledged
// pays one small write per request instead of one B+tree transaction
// (which rewrites every page it touches, the branch pages above them and
// the meta page, with a write call per page). The durability is the
// storage's: the record is in the page cache when Batch returns (a killed
// process loses nothing), and on disk with Fsync.
//
// Replaying is idempotent: every operation carries a whole value, so
// applying a record the storage already holds changes nothing. A checkpoint
// therefore commits the storage first and empties the journal after; a
// crash between the two replays the same records at the next Open.
package journal // import "github.com/gpubuild/otelcol-gpubuild/internal/state/journal"

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// Config is the journal's part of a component's state settings.
type Config struct {
	// Directory holds the journal files; unset: no journal, each batch is
	// one storage transaction.
	Directory string `mapstructure:"directory"`
	// Fsync flushes each record to disk before Batch returns (power loss);
	// without it a record survives a killed process, as file_storage's
	// transactions without its fsync do.
	Fsync bool `mapstructure:"fsync"`
	// CheckpointInterval is how often the journal's records are written
	// into the storage, in one transaction, and the journal emptied.
	CheckpointInterval time.Duration `mapstructure:"checkpoint_interval"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// Problems checks the settings of a journal configured at field (such as
// "state.journal") and written into the storage named by storageField,
// which hasStorage says is set; each error names its field.
func (cfg Config) Problems(field, storageField string, hasStorage bool) []error {
	var errs []error
	if cfg.Directory != "" && !hasStorage {
		errs = append(errs, fmt.Errorf("%s.directory: needs %s, which the journal is written into", field, storageField))
	}
	if cfg.CheckpointInterval <= 0 {
		errs = append(errs, fmt.Errorf("%s.checkpoint_interval: must be positive", field))
	}
	return errs
}

// DefaultCheckpointInterval bounds the journal to a few seconds of batches.
const DefaultCheckpointInterval = 10 * time.Second

// maxJournalBytes checkpoints early when the records pile up faster than
// the interval expects, so that a checkpoint never reads more than this.
const maxJournalBytes = 8 << 20

// Replay says what Open found in a journal left by the previous process.
type Replay struct {
	Records int // records applied to the storage
	// DiscardedBytes were past the last whole record: a record torn by a
	// crash or a full disk (never acknowledged), or the whole file when
	// Err is set.
	DiscardedBytes int64
	// Err is why the journal could not be read at all (ErrUnknownFormat,
	// or a damaged header); its records were not applied.
	Err error
}

// Client is a storage client whose batches go to the journal. It lists its
// entries (storage.Walker) when the storage under it does. It is safe for
// concurrent use.
type Client struct {
	base     storage.Client
	path     string
	fsync    bool
	interval time.Duration
	now      func() time.Time
	// maxIndexKeys: see the constant.
	maxIndexKeys int

	mu             sync.Mutex
	f              file
	size           int64 // bytes of whole records and the header
	lastCheckpoint time.Time
	buf            []byte
	// checkpointErr is the last failed checkpoint's error, until one
	// succeeds (CheckpointError).
	checkpointErr error

	// indexing (IndexAppends): the last operation of each key since the
	// checkpoint, where it starts in the file, is noted as each batch is
	// appended, so that a checkpoint reads those operations only instead
	// of the whole journal, twice. Past maxIndexKeys keys the index is
	// dropped (indexFull) and the checkpoint reads the journal back.
	indexing  bool
	indexFull bool
	index     keyIndex
	opStarts  []int64 // scratch: where each operation of a batch starts
}

// Open opens (creating it when missing) the journal at path in front of
// base, applies the records a previous process left to base and empties
// the journal. A journal it cannot read is set aside, not applied: Replay
// says so; the error is for failures to open, write or apply.
func Open(ctx context.Context, base storage.Client, path string, cfg Config) (*Client, Replay, error) {
	interval := cfg.CheckpointInterval
	if interval <= 0 {
		interval = DefaultCheckpointInterval
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, Replay{}, err
	}
	c := &Client{base: base, path: path, fsync: cfg.Fsync, interval: interval, now: time.Now, maxIndexKeys: maxIndexKeys, f: f}
	replay, err := c.replay(ctx)
	if err != nil {
		_ = f.Close()
		return nil, replay, err
	}
	c.lastCheckpoint = c.now()
	return c, replay, nil
}

// Batch appends the sets and deletes as one record; a batch that reads
// (a Get) is run on the storage after a checkpoint. When the interval has
// passed, the journal is then written into the storage: a failure of that
// does not fail the batch, whose record is in the journal
// (CheckpointError reports it).
func (c *Client) Batch(ctx context.Context, ops ...*storage.Operation) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, op := range ops {
		if op.Type == storage.Get {
			if err := c.checkpointLocked(ctx); err != nil {
				return err
			}
			return c.base.Batch(ctx, ops...)
		}
	}
	if len(ops) == 0 {
		return nil
	}
	if err := c.append(ops); err != nil {
		return err
	}
	// After a failed checkpoint the next waits for the interval, however
	// large the journal: the storage is failing.
	if (c.size >= maxJournalBytes && c.checkpointErr == nil) || c.now().Sub(c.lastCheckpoint) >= c.interval {
		_ = c.checkpointLocked(ctx)
	}
	return nil
}

// Get reads from the storage after a checkpoint.
func (c *Client) Get(ctx context.Context, key string) ([]byte, error) {
	op := storage.GetOperation(key)
	if err := c.Batch(ctx, op); err != nil {
		return nil, err
	}
	return op.Value, nil
}

// Set appends one set.
func (c *Client) Set(ctx context.Context, key string, value []byte) error {
	return c.Batch(ctx, storage.SetOperation(key, value))
}

// Delete appends one delete.
func (c *Client) Delete(ctx context.Context, key string) error {
	return c.Batch(ctx, storage.DeleteOperation(key))
}

// Walk lists the storage's entries after a checkpoint; the operations fn
// returns are applied by the storage.
func (c *Client) Walk(ctx context.Context, fn storage.WalkFunc) error {
	walker, ok := c.base.(storage.Walker)
	if !ok {
		return errors.New("the storage cannot list its entries")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.checkpointLocked(ctx); err != nil {
		return err
	}
	return walker.Walk(ctx, fn)
}

// Storage is the client the journal is written into.
func (c *Client) Storage() storage.Client { return c.base }

// Close checkpoints, closes the journal and the storage client. When the
// checkpoint fails the journal keeps its records for the next Open.
func (c *Client) Close(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.checkpointLocked(ctx)
	return errors.Join(err, c.f.Close(), c.base.Close(ctx))
}

// file is what the journal does with its file: an *os.File (tests put
// one that fails in front of it).
type file interface {
	io.ReaderAt
	io.WriterAt
	Truncate(size int64) error
	Sync() error
	Stat() (os.FileInfo, error)
	Close() error
}

var (
	_ storage.Client = (*Client)(nil)
	_ storage.Walker = (*Client)(nil)
)
