// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package send // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/send"

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

// BodyBuffers is what one request's body holds until the request is
// done: the body as sent (compressed, or as written when small).
type BodyBuffers struct {
	sent bytes.Buffer
	Body preparedBody
	// hash identifies the request by its uncompressed body: the same
	// datums give the same hash in any process (see internal/answered).
	hash uint64
}

// BodyWriter writes and compresses request bodies one at a time, in one
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
type BodyWriter struct {
	pool sync.Pool // *bodyBuffers

	Mu   sync.Mutex // guards the fields below
	Raw  []byte
	Gzip *gzip.Writer
	// used is when the last body was written; drop, when set, runs once
	// the scratch may have gone unused for keep.
	used time.Time
	drop *time.Timer
	keep time.Duration
}

// ScratchKeep is how long the uncompressed buffer and the gzip writer are
// kept after the last body.
const ScratchKeep = 1500 * time.Millisecond

// NewBodyWriter returns a writer that keeps its scratch for keep after the last body.
func NewBodyWriter(keep time.Duration) *BodyWriter {
	w := &BodyWriter{keep: keep}
	w.pool.New = func() any { return &BodyBuffers{} }
	return w
}

// keepScratch notes that a body is being written; w.mu is held.
func (w *BodyWriter) keepScratch() {
	w.used = time.Now()
	if w.drop == nil {
		w.drop = time.AfterFunc(w.keep, w.dropUnusedScratch)
	}
}

// dropUnusedScratch lets the buffer and the writer go once they have been
// unused for w.keep, or waits for the rest of that time.
func (w *BodyWriter) dropUnusedScratch() {
	w.Mu.Lock()
	defer w.Mu.Unlock()
	if unused := time.Since(w.used); unused < w.keep {
		w.drop.Reset(w.keep - unused)
		return
	}
	w.Raw, w.Gzip, w.drop = nil, nil, nil
}

// Prepare writes the body of one request; release gives its buffer back
// once nothing reads the body any more.
func (w *BodyWriter) Prepare(namespace string, datums []translate.Datum) (*BodyBuffers, error) {
	b := w.pool.Get().(*BodyBuffers)
	b.sent.Reset()
	w.Mu.Lock()
	defer w.Mu.Unlock()
	w.keepScratch()
	w.Raw = translate.AppendPutMetricData(w.Raw[:0], namespace, datums)
	b.hash = xxhash.Sum64(w.Raw)
	if len(w.Raw) < minCompressBytes {
		b.sent.Write(w.Raw) // a copy: raw is the next body's
		b.Body = preparedBody{Bytes: b.sent.Bytes()}
		return b, nil
	}
	if err := w.compress(&b.sent, w.Raw); err != nil {
		w.Release(b)
		return nil, err
	}
	b.Body = preparedBody{Bytes: b.sent.Bytes(), Gzipped: true}
	return b, nil
}

// compress writes raw gzipped to dst; w.mu is held.
func (w *BodyWriter) compress(dst *bytes.Buffer, raw []byte) error {
	if w.Gzip == nil {
		w.Gzip = gzip.NewWriter(dst)
	} else {
		w.Gzip.Reset(dst)
	}
	_, err := w.Gzip.Write(raw)
	if err == nil {
		err = w.Gzip.Close()
	}
	w.Gzip.Reset(nil) // do not keep dst alive
	return err
}

// Release gives b's buffer back.
func (w *BodyWriter) Release(b *BodyBuffers) {
	b.Body = preparedBody{}
	w.pool.Put(b)
}
