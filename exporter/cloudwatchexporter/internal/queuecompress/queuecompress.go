// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package queuecompress stores the persistent sending queue's requests
// compressed. exporterhelper writes each queued request as one storage
// value of serialized OTLP, in which every data point repeats its metric
// name and attribute strings; s2 shrinks such a value 5 to 40 times at
// several GB/s. That cuts what file_storage (bbolt) copies, writes and maps
// per request, and the disk a backlog takes.
//
// Values are compressed only under the keys the caller selects (the queue's
// items, not its metadata) and only when that makes them smaller; a value
// read back is decompressed only when it starts with the format's prefix,
// so entries written uncompressed (by an earlier release) read as before.
package queuecompress // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/queuecompress"

import (
	"bytes"
	"context"
	"errors"
	"sync"

	"github.com/klauspost/compress/s2"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// prefix starts every compressed value: a zero byte, which no protobuf
// message can start with (field number 0 is invalid), "s2" and the format
// version. An s2 block follows.
const prefix = "\x00s2\x01"

// MinBytes is the smallest value worth compressing.
const MinBytes = 256

// MaxDecodedBytes bounds the size a compressed value may claim, so that a
// damaged header cannot make a read allocate gigabytes. Queued requests
// are far smaller (OTLP requests are bounded at a few MiB).
const MaxDecodedBytes = 256 << 20

// ErrTooLarge is returned by Decode for a value claiming more than MaxDecodedBytes.
var ErrTooLarge = errors.New("compressed queue value claims more than the allowed size")

// Encode returns value compressed, or value itself when compressing does
// not make it smaller. dst is used when large enough.
func Encode(dst, value []byte) []byte {
	if len(value) < MinBytes {
		return value
	}
	n := len(prefix) + s2.MaxEncodedLen(len(value))
	if cap(dst) < n {
		dst = make([]byte, n)
	}
	dst = dst[:n]
	copy(dst, prefix)
	enc := s2.Encode(dst[len(prefix):], value)
	if len(prefix)+len(enc) >= len(value) {
		return value
	}
	return dst[:len(prefix)+len(enc)]
}

// Compressed reports whether value was written by Encode compressed.
func Compressed(value []byte) bool {
	return len(value) >= len(prefix) && string(value[:len(prefix)]) == prefix
}

// Decode returns value decompressed if Encode compressed it, else value.
func Decode(value []byte) ([]byte, error) {
	if !Compressed(value) {
		return value, nil
	}
	block := value[len(prefix):]
	n, err := s2.DecodedLen(block)
	if err != nil {
		return nil, err
	}
	if n > MaxDecodedBytes {
		return nil, ErrTooLarge
	}
	return s2.Decode(make([]byte, n), block)
}

// Client compresses the values of the keys compress selects on their way
// to the wrapped client and decompresses every value read. A value that
// cannot be decompressed is handed on as stored, for the reader to reject
// as it rejects any damaged entry.
type Client struct {
	storage.Client
	compress func(key string) bool
	scratch  sync.Pool // *[]byte: room to compress into
}

// NewClient wraps c.
func NewClient(c storage.Client, compress func(key string) bool) *Client {
	return &Client{Client: c, compress: compress}
}

// Get reads key's value, decompressed.
func (c *Client) Get(ctx context.Context, key string) ([]byte, error) {
	v, err := c.Client.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return decodeOrKeep(v), nil
}

// Set writes key's value, compressed if key is selected.
func (c *Client) Set(ctx context.Context, key string, value []byte) error {
	return c.Batch(ctx, storage.SetOperation(key, value))
}

// Batch compresses the values of the selected Set operations for the
// wrapped Batch, gives the caller's values back afterwards, and
// decompresses what the Get operations read. Each compressed value is a
// slice of its own, exactly its size: a storage may keep what it is given.
func (c *Client) Batch(ctx context.Context, ops ...*storage.Operation) error {
	type swapped struct {
		op    *storage.Operation
		value []byte
	}
	var swaps []swapped
	var scratch *[]byte
	for _, op := range ops {
		if op.Type != storage.Set || len(op.Value) < MinBytes || !c.compress(op.Key) {
			continue
		}
		if scratch == nil {
			scratch, _ = c.scratch.Get().(*[]byte)
			if scratch == nil {
				scratch = new([]byte)
			}
		}
		enc := Encode(*scratch, op.Value)
		if !Compressed(enc) {
			continue
		}
		*scratch = enc
		swaps = append(swaps, swapped{op, op.Value})
		op.Value = bytes.Clone(enc)
	}
	if scratch != nil {
		c.scratch.Put(scratch)
	}
	err := c.Client.Batch(ctx, ops...)
	for _, s := range swaps {
		s.op.Value = s.value // the caller's operations are as given
	}
	if err != nil {
		return err
	}
	for _, op := range ops {
		if op.Type == storage.Get {
			op.Value = decodeOrKeep(op.Value)
		}
	}
	return nil
}

func decodeOrKeep(v []byte) []byte {
	d, err := Decode(v)
	if err != nil {
		return v
	}
	return d
}

// Host is a component.Host whose storage extension storageID hands out,
// to owner's client named name, a Client compressing the keys compress
// selects. Every other client and extension is unchanged.
type Host struct {
	component.Host
	storageID, owner component.ID
	name             string
	compress         func(key string) bool
}

// NewHost wraps host.
func NewHost(host component.Host, storageID, owner component.ID, name string, compress func(key string) bool) *Host {
	return &Host{Host: host, storageID: storageID, owner: owner, name: name, compress: compress}
}

// Report passes the component's status on to the host: the wrapper must
// not hide that the service's host is a componentstatus.Reporter.
func (h *Host) Report(ev *componentstatus.Event) { componentstatus.ReportStatus(h.Host, ev) }

// GetExtensions returns the host's extensions, the storage one wrapped.
func (h *Host) GetExtensions() map[component.ID]component.Component {
	exts := h.Host.GetExtensions()
	ext, ok := exts[h.storageID].(storage.Extension)
	if !ok {
		return exts // no such storage: the queue reports it as it would
	}
	wrapped := make(map[component.ID]component.Component, len(exts))
	for id, c := range exts {
		wrapped[id] = c
	}
	wrapped[h.storageID] = &extension{Extension: ext, host: h}
	return wrapped
}

type extension struct {
	storage.Extension
	host *Host
}

func (e *extension) GetClient(ctx context.Context, kind component.Kind, id component.ID, name string) (storage.Client, error) {
	c, err := e.Extension.GetClient(ctx, kind, id, name)
	if err != nil || kind != component.KindExporter || id != e.host.owner || name != e.host.name {
		return c, err
	}
	return NewClient(c, e.host.compress), nil
}
