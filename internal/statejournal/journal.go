// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package statejournal puts an append-only journal in front of a storage
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
package statejournal // import "github.com/gpubuild/otelcol-gpubuild/internal/statejournal"

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"
	"sync"
	"time"
	"unsafe"

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

// File layout: a header (magic and format version), then records. A record
// is the length of its body (uint32), the CRC-32C of the body (uint32) and
// the body: operations, each a type byte, the key's length (uvarint), the
// key, and for a set the value's length (uvarint) and the value.
const (
	magic      = "gpbj"
	version    = 1
	headerSize = 8 // magic and version
	recordHead = 8
	opSet      = 1
	opDelete   = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrUnknownFormat is the error of a journal written by a later version.
var ErrUnknownFormat = errors.New("journal written in an unknown format")

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
	f              *os.File
	size           int64 // bytes of whole records and the header
	lastCheckpoint time.Time
	buf            []byte
	// checkpointErr is the last failed checkpoint's error, until one
	// succeeds (CheckpointError).
	checkpointErr error

	// indexing (IndexAppends): the last operation of each key since the
	// checkpoint, where it starts in the file, is noted as each batch is
	// appended (index[key] is its place in last), so that a checkpoint
	// reads those operations only instead of the whole journal, twice.
	// Past maxIndexKeys keys the index is dropped (indexFull) and the
	// checkpoint reads the journal back.
	indexing  bool
	indexFull bool
	index     map[string]int
	last      []lastOp
	keys      []byte  // the index's keys (last[i].key points into it)
	opStarts  []int64 // scratch: where each operation of a batch starts
	sorted    []lastOp
}

// lastOp is the last operation of key since the checkpoint, at offset off.
type lastOp struct {
	key string
	off int64
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

// replay applies what the file holds and leaves it with a header only.
func (c *Client) replay(ctx context.Context) (Replay, error) {
	st, err := c.f.Stat()
	if err != nil {
		return Replay{}, err
	}
	var r Replay
	if st.Size() > 0 {
		records, valid, formatErr, err := c.apply(ctx, st.Size())
		r.Records, r.DiscardedBytes, r.Err = records, st.Size()-valid, formatErr
		if err != nil {
			return r, err
		}
		if errors.Is(formatErr, ErrUnknownFormat) {
			// Keep the file for the version that wrote it.
			if err := os.Rename(c.path, c.path+".unknown-format"); err != nil {
				return r, err
			}
			f, err := os.OpenFile(c.path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
			if err != nil {
				return r, err
			}
			_ = c.f.Close()
			c.f = f
		}
	}
	if err := c.reset(); err != nil {
		return r, err
	}
	return r, nil
}

// reset empties the file down to its header.
func (c *Client) reset() error {
	if err := c.f.Truncate(0); err != nil {
		return err
	}
	var h [headerSize]byte
	copy(h[:], magic)
	binary.LittleEndian.PutUint32(h[len(magic):], version)
	if _, err := c.f.WriteAt(h[:], 0); err != nil {
		return err
	}
	c.size = headerSize
	return nil
}

// IndexAppends makes the journal note, as each batch is appended, where
// each key's last operation is, so that a checkpoint reads only those
// operations: for a journal whose batches write a few keys each, many of
// them again (a derivation's jobs), at the cost of the index's memory,
// some 100 bytes a key until the next checkpoint. A journal that rewrites
// every key in every batch (a whole state) does better without.
func (c *Client) IndexAppends() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.size > headerSize {
		return // records appended before: they are not indexed
	}
	c.indexing, c.index = true, map[string]int{}
}

// chunkBytes bounds the keys and values one storage transaction of a
// checkpoint carries, and so the memory a checkpoint takes: a large journal
// is written in several transactions, which replay makes safe (the journal
// is emptied only after the last).
const chunkBytes = 256 << 10

// maxIndexKeys bounds the distinct keys a checkpoint indexes at once (some
// 60 bytes each): a journal with more is written as consecutive segments,
// each the net effect of its own records.
const maxIndexKeys = 1 << 16

// apply reads the journal's first size bytes and writes the net effect of
// its whole records into the storage: each key's last operation only, in
// transactions of at most chunkBytes. A state rewritten by every batch
// (the same keys in every record) thus reaches the storage once per
// checkpoint, not once per record. It returns how many records it found and
// the bytes they and the header take; formatErr when the header is damaged
// or of a later version (nothing is applied), err when the storage refused
// a chunk.
func (c *Client) apply(ctx context.Context, size int64) (records int, valid int64, formatErr, err error) {
	var head [headerSize]byte
	if _, err := c.f.ReadAt(head[:], 0); err != nil || string(head[:len(magic)]) != magic {
		return 0, 0, errors.New("journal header damaged"), nil
	}
	if binary.LittleEndian.Uint32(head[len(magic):]) != version {
		return 0, 0, ErrUnknownFormat, nil
	}
	valid = headerSize
	ch := newChunk(int(min(size, chunkBytes)))
	var body []byte
	for {
		seg := c.scan(valid, size, &body)
		if seg.records == 0 {
			break
		}
		if err := c.write(ctx, ch, valid, &seg, &body); err != nil {
			return records, valid, nil, fmt.Errorf("writing the journal %s into the storage: %w", c.path, err)
		}
		records += seg.records
		valid = seg.end
		if !seg.more {
			break
		}
	}
	return records, valid, nil, nil
}

// segment is a run of whole records and, for each key, the number of its
// last operation among the segment's operations (last[index[key]]: a key
// met again is only looked up, which does not copy it).
type segment struct {
	index   map[string]int
	last    []int
	records int
	end     int64 // where the segment's records end
	more    bool  // whole records follow (the index was full)
}

// isLast says whether operation op is key's last in the segment.
func (seg *segment) isLast(key []byte, op int) bool {
	return seg.last[seg.index[string(key)]] == op
}

// records calls fn with each whole record body from offset from on, up to
// size, until fn returns false; it returns where the last whole record
// read ends. A record that is incomplete or fails its checksum ends the
// reading: it and anything after it are not the journal's.
func (c *Client) records(from, size int64, body *[]byte, fn func(body []byte) bool) int64 {
	r := bufio.NewReaderSize(io.NewSectionReader(c.f, from, size-from), int(min(size-from, 32<<10)))
	end := from
	for {
		var rh [recordHead]byte
		if _, err := io.ReadFull(r, rh[:]); err != nil {
			return end
		}
		n := int64(binary.LittleEndian.Uint32(rh[:]))
		if n > size-end-recordHead {
			return end
		}
		if int64(cap(*body)) < n {
			*body = make([]byte, n)
		}
		b := (*body)[:n]
		if _, err := io.ReadFull(r, b); err != nil {
			return end
		}
		if crc32.Checksum(b, castagnoli) != binary.LittleEndian.Uint32(rh[4:]) || !wellFormed(b) {
			return end
		}
		if !fn(b) {
			return end
		}
		end += recordHead + n
	}
}

// scan indexes the whole records from offset from on, until the index
// holds maxIndexKeys keys (it may pass that by one record's keys).
func (c *Client) scan(from, size int64, body *[]byte) segment {
	seg := segment{index: map[string]int{}}
	op := 0
	seg.end = c.records(from, size, body, func(b []byte) bool {
		if seg.records > 0 && len(seg.last) >= c.maxIndexKeys {
			seg.more = true
			return false
		}
		for len(b) > 0 {
			key, _, rest := readOp(b)
			if i, ok := seg.index[string(key)]; ok {
				seg.last[i] = op
			} else {
				seg.index[string(key)] = len(seg.last)
				seg.last = append(seg.last, op)
			}
			op++
			b = rest
		}
		seg.records++
		return true
	})
	return seg
}

// write writes the last operation of each key of seg, whose records start
// at offset from, chunk by chunk.
func (c *Client) write(ctx context.Context, ch *chunk, from int64, seg *segment, body *[]byte) error {
	op := 0
	var err error
	c.records(from, seg.end, body, func(b []byte) bool {
		for len(b) > 0 && err == nil {
			typ := b[0]
			key, value, rest := readOp(b)
			b = rest
			if seg.isLast(key, op) {
				err = ch.add(ctx, c.base, typ, key, value)
			}
			op++
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	return ch.flush(ctx, c.base)
}

// chunk collects operations for one storage transaction, their values
// copied into one arena that never grows (the operations point into it).
type chunk struct {
	arena []byte
	bytes int // keys and values
	ops   []storage.Operation
	ptrs  []*storage.Operation
}

func newChunk(capacity int) *chunk {
	return &chunk{arena: make([]byte, 0, capacity)}
}

// add adds one operation, first writing the chunk when the operation's key
// and value would take it past its capacity.
func (ch *chunk) add(ctx context.Context, base storage.Client, typ byte, key, value []byte) error {
	return ch.addKey(ctx, base, typ, string(key), value)
}

// addKey is add with the key as a string that the caller no longer
// changes: it is not copied.
func (ch *chunk) addKey(ctx context.Context, base storage.Client, typ byte, key string, value []byte) error {
	if len(ch.ops) > 0 && ch.bytes+len(key)+len(value) > cap(ch.arena) {
		if err := ch.flush(ctx, base); err != nil {
			return err
		}
	}
	op := storage.Operation{Key: key, Type: storage.Set}
	if typ == opDelete {
		op.Type = storage.Delete
	} else {
		op.Value = ch.keep(value)
	}
	ch.bytes += len(key) + len(value)
	ch.ops = append(ch.ops, op)
	return nil
}

// keep copies v into the arena, or on its own when the arena is full (a
// value larger than a chunk).
func (ch *chunk) keep(v []byte) []byte {
	if len(ch.arena)+len(v) > cap(ch.arena) {
		return bytes.Clone(v)
	}
	start := len(ch.arena)
	ch.arena = append(ch.arena, v...)
	return ch.arena[start:len(ch.arena):len(ch.arena)]
}

// flush writes the chunk's operations in one transaction and empties it.
func (ch *chunk) flush(ctx context.Context, base storage.Client) error {
	if len(ch.ops) == 0 {
		return nil
	}
	ch.ptrs = ch.ptrs[:0]
	for i := range ch.ops {
		ch.ptrs = append(ch.ptrs, &ch.ops[i])
	}
	err := base.Batch(ctx, ch.ptrs...)
	clear(ch.ptrs)
	if err != nil {
		return err
	}
	clear(ch.ops)
	ch.arena, ch.ops, ch.bytes = ch.arena[:0], ch.ops[:0], 0
	return nil
}

// wellFormed checks that body is a sequence of whole operations, so that a
// record is applied whole or not at all.
func wellFormed(body []byte) bool {
	for len(body) > 0 {
		typ := body[0]
		if typ != opSet && typ != opDelete {
			return false
		}
		_, rest, ok := readBytes(body[1:])
		if ok && typ == opSet {
			_, rest, ok = readBytes(rest)
		}
		if !ok {
			return false
		}
		body = rest
	}
	return true
}

// readOp reads one operation of a well-formed body.
func readOp(body []byte) (key, value, rest []byte) {
	key, rest, _ = readBytes(body[1:])
	if body[0] == opSet {
		value, rest, _ = readBytes(rest)
	}
	return key, value, rest
}

func readBytes(b []byte) (v, rest []byte, ok bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, false
	}
	return b[k : k+int(n)], b[k+int(n):], true
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

// append writes one record at the end of the whole records.
func (c *Client) append(ops []*storage.Operation) error {
	n := recordHead
	for _, op := range ops {
		n += 1 + uvarintLen(len(op.Key)) + len(op.Key)
		if op.Type == storage.Set {
			n += uvarintLen(len(op.Value)) + len(op.Value)
		}
	}
	b := c.buf[:0]
	if cap(b) < n {
		b = make([]byte, 0, n) // once, not grown by doubling: a record can be large
	}
	b = append(b, make([]byte, recordHead)...)
	starts := c.opStarts[:0]
	for _, op := range ops {
		if c.indexing {
			starts = append(starts, c.size+int64(len(b)))
		}
		switch op.Type {
		case storage.Set:
			b = append(b, opSet)
			b = binary.AppendUvarint(b, uint64(len(op.Key)))
			b = append(b, op.Key...)
			b = binary.AppendUvarint(b, uint64(len(op.Value)))
			b = append(b, op.Value...)
		case storage.Delete:
			b = append(b, opDelete)
			b = binary.AppendUvarint(b, uint64(len(op.Key)))
			b = append(b, op.Key...)
		}
	}
	body := b[recordHead:]
	binary.LittleEndian.PutUint32(b, uint32(len(body)))
	binary.LittleEndian.PutUint32(b[4:], crc32.Checksum(body, castagnoli))
	c.buf = b
	if _, err := c.f.WriteAt(b, c.size); err != nil {
		// A torn record would hide the ones after it: cut it off.
		_ = c.f.Truncate(c.size)
		return fmt.Errorf("writing the journal %s: %w", c.path, err)
	}
	if c.fsync {
		if err := c.f.Sync(); err != nil {
			_ = c.f.Truncate(c.size)
			return fmt.Errorf("syncing the journal %s: %w", c.path, err)
		}
	}
	c.size += int64(len(b))
	if cap(c.buf) > keptBufferBytes {
		c.buf = nil // a large batch does not pin its buffer between batches
	}
	if c.indexing {
		c.note(ops, starts)
		c.opStarts = starts[:0]
	}
	return nil
}

// note indexes the operations of a batch just appended, which start at
// starts.
func (c *Client) note(ops []*storage.Operation, starts []int64) {
	if c.indexFull {
		return
	}
	for i, op := range ops {
		if op.Type != storage.Set && op.Type != storage.Delete {
			continue
		}
		if j, ok := c.index[op.Key]; ok {
			c.last[j].off = starts[i]
			continue
		}
		if len(c.last) >= c.maxIndexKeys {
			c.indexFull = true
			c.dropIndex()
			return
		}
		// The key may be the caller's buffer: the index keeps a copy, in
		// one buffer for all (one that grows leaves the keys in the
		// previous one, which they keep until the next checkpoint).
		if len(c.keys)+len(op.Key) > cap(c.keys) {
			c.keys = make([]byte, 0, max(2*cap(c.keys), 4096, len(op.Key)))
		}
		start := len(c.keys)
		c.keys = append(c.keys, op.Key...)
		key := unsafe.String(unsafe.SliceData(c.keys[start:]), len(op.Key))
		c.index[key] = len(c.last)
		c.last = append(c.last, lastOp{key: key, off: starts[i]})
	}
}

// dropIndex empties the index, keeping its map and list for the next
// checkpoint interval, which has about as many keys. The keys' buffer is
// not reused: the storage was handed its keys and may keep them.
func (c *Client) dropIndex() {
	clear(c.index)
	clear(c.last)
	c.last = c.last[:0]
	c.keys = make([]byte, 0, cap(c.keys))
}

// applyIndexed writes the last operation of each key, as the index has
// them, into the storage, in the order of the journal, chunk by chunk.
func (c *Client) applyIndexed(ctx context.Context) error {
	ops := append(c.sorted[:0], c.last...)
	slices.SortFunc(ops, func(a, b lastOp) int { return cmp.Compare(a.off, b.off) })
	defer func() { clear(ops); c.sorted = ops[:0] }()
	ch := newChunk(int(min(c.size, chunkBytes)))
	r := window{f: c.f, size: c.size, buf: make([]byte, min(c.size, 64<<10))}
	for _, op := range ops {
		typ, value, err := r.op(op.off, len(op.key))
		if err != nil {
			return fmt.Errorf("reading the journal %s: %w", c.path, err)
		}
		if err := ch.addKey(ctx, c.base, typ, op.key, value); err != nil {
			return fmt.Errorf("writing the journal %s into the storage: %w", c.path, err)
		}
	}
	if err := ch.flush(ctx, c.base); err != nil {
		return fmt.Errorf("writing the journal %s into the storage: %w", c.path, err)
	}
	return nil
}

// window reads operations of the journal at increasing offsets through
// one buffer.
type window struct {
	f     *os.File
	size  int64 // the end of the whole records
	buf   []byte
	start int64 // the offset of buf[0]
	n     int   // bytes of buf read
}

// op returns the type and value (for a set) of the operation at off,
// whose key is keyLen bytes long; the value is valid until the next call.
func (w *window) op(off int64, keyLen int) (byte, []byte, error) {
	for {
		if off >= w.start && off < w.start+int64(w.n) {
			b := w.buf[off-w.start : w.n]
			key, rest, ok := readBytes(b[1:])
			if ok && len(key) != keyLen {
				return 0, nil, errors.New("the index does not match the journal")
			}
			if ok && b[0] == opDelete {
				return opDelete, nil, nil
			}
			if ok {
				if v, _, ok := readBytes(rest); ok {
					return opSet, v, nil
				}
			}
			if off == w.start && w.n == len(w.buf) && int64(len(w.buf)) < w.size-off {
				w.buf = make([]byte, min(2*len(w.buf), int(w.size-off))) // an operation larger than the buffer
			} else if off == w.start {
				return 0, nil, errors.New("the index points past the journal's records")
			}
		}
		w.start, w.n = off, 0
		n, err := w.f.ReadAt(w.buf[:min(int64(len(w.buf)), w.size-off)], off)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, nil, err
		}
		w.n = n
		if n == 0 {
			return 0, nil, errors.New("the index points past the journal's records")
		}
	}
}

func uvarintLen(n int) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], uint64(n))
}

// keptBufferBytes: a record buffer up to this size is kept for the next
// batch. The derivation's batches are a few KiB; the cumulative state's,
// every series of an export, some 70 bytes each, are not kept between
// exports.
const keptBufferBytes = 64 << 10

// Checkpoint writes the journal's records into the storage (one
// transaction per chunkBytes of records) and empties the journal.
func (c *Client) Checkpoint(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.checkpointLocked(ctx)
}

func (c *Client) checkpointLocked(ctx context.Context) error {
	c.lastCheckpoint = c.now()
	if c.size <= headerSize {
		return nil
	}
	err := c.applyJournal(ctx)
	c.checkpointErr = err
	return err
}

func (c *Client) applyJournal(ctx context.Context) error {
	if c.indexing && !c.indexFull {
		if err := c.applyIndexed(ctx); err != nil {
			return err
		}
	} else {
		_, _, formatErr, err := c.apply(ctx, c.size)
		if err == nil {
			err = formatErr
		}
		if err != nil {
			return err
		}
	}
	// Written: the records may go. Should this fail they stay, and are
	// applied again, to the same effect.
	if err := c.reset(); err != nil {
		return fmt.Errorf("emptying the journal %s: %w", c.path, err)
	}
	if c.indexing {
		c.dropIndex()
		c.indexFull = false
	}
	return nil
}

// CheckpointError is the error of the last checkpoint if it failed.
func (c *Client) CheckpointError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.checkpointErr
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

var (
	_ storage.Client = (*Client)(nil)
	_ storage.Walker = (*Client)(nil)
)
