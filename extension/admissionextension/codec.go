// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package admissionextension // import "github.com/gpubuild/otelcol-gpubuild/extension/admissionextension"

import (
	"sync"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
)

// requestCodec decodes OTLP requests as pdata's gRPC codec does, from one
// contiguous copy of the message, but not into pdata's pool, whose larger
// tiers are 512 KiB, 1, 4 and 16 MiB: a 1.1 MiB message holds a 4 MiB
// buffer, and the pool keeps it until the second garbage collection after
// the request (at 20k points/s that was 10 MiB of a sidecar's RSS). The
// copy goes into messageBuffers instead: a buffer per request in flight,
// cut to each message's size and reused, so that the usual requests (an
// SDK's batch, a few hundred KiB) allocate nothing; a larger one is copied
// into a buffer of its size that is garbage once it is decoded. Everything
// else (answers, other services' messages) is the registered proto codec's.
type requestCodec struct {
	proto   encoding.CodecV2
	buffers *messageBuffers
}

// protoUnmarshaler is what pdata's OTLP request types implement.
type protoUnmarshaler interface {
	UnmarshalProto([]byte) error
}

// newRequestCodec keeps at most one buffer per request in flight: more are
// never in use at once.
func newRequestCodec(maxInFlight int) requestCodec {
	return requestCodec{proto: encoding.GetCodecV2("proto"), buffers: newMessageBuffers(maxKeptBufferBytes, maxKeptBytes, maxInFlight)}
}

func (c requestCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(protoUnmarshaler)
	if !ok {
		return c.proto.Unmarshal(data, v)
	}
	// A message that arrived in one buffer is read where it is; one in
	// several is copied into one buffer. pdata copies what it keeps (its
	// strings and bytes), so the buffer is free again once it returns.
	buf := data.MaterializeToBuffer(c.buffers)
	defer buf.Free()
	return m.UnmarshalProto(buf.ReadOnlyData())
}

func (c requestCodec) Marshal(v any) (mem.BufferSlice, error) { return c.proto.Marshal(v) }

func (requestCodec) Name() string { return "proto" }

// The buffers kept for the next messages: each at most maxKeptBufferBytes
// (an SDK's default batch of 512 spans is 100-300 KiB), all together at
// most maxKeptBytes, which is what the codec holds between requests.
const (
	maxKeptBufferBytes = 512 << 10
	maxKeptBytes       = 1 << 20
)

// messageBuffers is a mem.BufferPool of buffers cut to the length asked
// for: a kept buffer that is large enough, or a new one of that length.
// Unlike a pool of size tiers it rounds nothing up, and unlike sync.Pool it
// is not emptied by a garbage collection: the few buffers it keeps are
// reused by every request, and what it holds is bounded in bytes.
type messageBuffers struct {
	maxBuffer, maxTotal, maxCount int

	mu    sync.Mutex
	kept  []*[]byte
	total int // capacity of the kept buffers
}

func newMessageBuffers(maxBuffer, maxTotal, maxCount int) *messageBuffers {
	return &messageBuffers{maxBuffer: maxBuffer, maxTotal: maxTotal, maxCount: maxCount}
}

// Get returns a buffer of length bytes, whose contents are not cleared.
func (p *messageBuffers) Get(length int) *[]byte {
	p.mu.Lock()
	for i, b := range p.kept {
		if cap(*b) >= length {
			p.take(i)
			p.mu.Unlock()
			*b = (*b)[:length]
			return b
		}
	}
	p.mu.Unlock()
	b := make([]byte, length)
	return &b
}

// Put keeps buf for a later Get when it is small enough and the kept
// buffers have room (in bytes and in number); otherwise it is left to the
// garbage collector. When one larger than a kept buffer does not fit, the
// smallest kept one makes room: the buffers kept follow the messages'
// sizes.
func (p *messageBuffers) Put(buf *[]byte) {
	c := cap(*buf)
	if c > p.maxBuffer {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.roomFor(c) {
		if len(p.kept) == 0 {
			return
		}
		i := p.smallest()
		if cap(*p.kept[i]) >= c {
			return
		}
		p.take(i)
	}
	p.kept = append(p.kept, buf)
	p.total += c
}

// roomFor says whether a buffer of capacity c may join the kept ones.
func (p *messageBuffers) roomFor(c int) bool {
	return p.total+c <= p.maxTotal && len(p.kept) < p.maxCount
}

// take removes the kept buffer i (the order of the kept ones is not kept).
func (p *messageBuffers) take(i int) {
	p.total -= cap(*p.kept[i])
	last := len(p.kept) - 1
	p.kept[i], p.kept[last] = p.kept[last], nil
	p.kept = p.kept[:last]
}

func (p *messageBuffers) smallest() int {
	s := 0
	for i, b := range p.kept {
		if cap(*b) < cap(*p.kept[s]) {
			s = i
		}
	}
	return s
}

var _ mem.BufferPool = (*messageBuffers)(nil)
