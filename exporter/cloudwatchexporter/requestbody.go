// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter"

import (
	"bytes"
	"compress/gzip"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"
)

// The exporter writes PutMetricData bodies itself, straight from its datums
// into a reused buffer, in the SDK's own encoding (smithy RPC v2 CBOR, the
// bytes the SDK would write: TestRequestBodyIsTheSDKs), and gzips them with
// a reused writer. The SDK's serializer builds each body by appending to a
// growing slice and its compression allocates a new gzip writer per request:
// together most of the bytes allocated per exported point. Signing, sending
// and reading the answer stay the SDK's; the protocol that sends the body
// written here is in upstream.go.

// bodyBuffers is what one request's body holds until the request is
// done: the body as sent (compressed, or as written when small).
type bodyBuffers struct {
	sent bytes.Buffer
	body preparedBody
	// hash identifies the request by its uncompressed body: the same
	// datums give the same hash in any process (see internal/answered).
	hash uint64
}

// bodyWriter writes and compresses request bodies one at a time, in one
// reused buffer for the uncompressed CBOR and one gzip writer (about 800
// KiB, made at the first body large enough to compress). A request in
// flight holds only its compressed bytes (far fewer: names and dimensions
// repeat from datum to datum), so max_concurrent_requests requests share
// one uncompressed buffer instead of holding one each; a sync.Pool of
// writers would keep one per processor that ever compressed (dozens on a
// GPU host). A body is written and compressed in about a millisecond, far
// below the pace CloudWatch takes requests at.
//
// The buffer and the writer are dropped once no body was written for
// scratchKeep: a steady load (the SDKs export every few seconds at most)
// keeps reusing them, while a sidecar quiet between bursts does not hold
// them in between, and the heap they leave is given back with the rest
// (internal/runtimetuning/idlememory, which waits for two quiet seconds, longer than
// scratchKeep).
type bodyWriter struct {
	pool sync.Pool // *bodyBuffers

	mu   sync.Mutex // guards the fields below
	raw  []byte
	gzip *gzip.Writer
	// used is when the last body was written; drop, when set, runs once
	// the scratch may have gone unused for keep.
	used time.Time
	drop *time.Timer
	keep time.Duration
}

// scratchKeep is how long the uncompressed buffer and the gzip writer are
// kept after the last body.
const scratchKeep = 1500 * time.Millisecond

func newBodyWriter(keep time.Duration) *bodyWriter {
	w := &bodyWriter{keep: keep}
	w.pool.New = func() any { return &bodyBuffers{} }
	return w
}

// keepScratch notes that a body is being written; w.mu is held.
func (w *bodyWriter) keepScratch() {
	w.used = time.Now()
	if w.drop == nil {
		w.drop = time.AfterFunc(w.keep, w.dropUnusedScratch)
	}
}

// dropUnusedScratch lets the buffer and the writer go once they have been
// unused for w.keep, or waits for the rest of that time.
func (w *bodyWriter) dropUnusedScratch() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if unused := time.Since(w.used); unused < w.keep {
		w.drop.Reset(w.keep - unused)
		return
	}
	w.raw, w.gzip, w.drop = nil, nil, nil
}

// prepare writes the body of one request; release gives its buffer back
// once nothing reads the body any more.
func (w *bodyWriter) prepare(namespace string, datums []translate.Datum) (*bodyBuffers, error) {
	b := w.pool.Get().(*bodyBuffers)
	b.sent.Reset()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.keepScratch()
	w.raw = translate.AppendPutMetricData(w.raw[:0], namespace, datums)
	b.hash = xxhash.Sum64(w.raw)
	if len(w.raw) < minCompressBytes {
		b.sent.Write(w.raw) // a copy: raw is the next body's
		b.body = preparedBody{bytes: b.sent.Bytes()}
		return b, nil
	}
	if err := w.compress(&b.sent, w.raw); err != nil {
		w.release(b)
		return nil, err
	}
	b.body = preparedBody{bytes: b.sent.Bytes(), gzipped: true}
	return b, nil
}

// compress writes raw gzipped to dst; w.mu is held.
func (w *bodyWriter) compress(dst *bytes.Buffer, raw []byte) error {
	if w.gzip == nil {
		w.gzip = gzip.NewWriter(dst)
	} else {
		w.gzip.Reset(dst)
	}
	_, err := w.gzip.Write(raw)
	if err == nil {
		err = w.gzip.Close()
	}
	w.gzip.Reset(nil) // do not keep dst alive
	return err
}

func (w *bodyWriter) release(b *bodyBuffers) {
	b.body = preparedBody{}
	w.pool.Put(b)
}
