// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package admissionextension // import "github.com/gpubuild/otelcol-gpubuild/extension/admissionextension"

import (
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
)

// requestCodec decodes OTLP requests as pdata's gRPC codec does, from one
// contiguous copy of the message, but a copy of the message's own size,
// garbage once the request is decoded. pdata's codec takes that copy from a
// pool whose larger tiers are 512 KiB, 1, 4 and 16 MiB: a 1.1 MiB message
// holds a 4 MiB buffer, and the pool keeps it until the second garbage
// collection after the request: at 20k points/s that was 10 MiB of a
// sidecar's RSS. Everything else (answers, other
// services' messages) is the registered proto codec's.
type requestCodec struct {
	proto encoding.CodecV2
}

// protoUnmarshaler is what pdata's OTLP request types implement.
type protoUnmarshaler interface {
	UnmarshalProto([]byte) error
}

func newRequestCodec() requestCodec {
	return requestCodec{proto: encoding.GetCodecV2("proto")}
}

func (c requestCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(protoUnmarshaler)
	if !ok {
		return c.proto.Unmarshal(data, v)
	}
	// A message that arrived in one buffer is read where it is; one in
	// several is copied into a buffer of its size.
	buf := data.MaterializeToBuffer(mem.NopBufferPool{})
	defer buf.Free()
	return m.UnmarshalProto(buf.ReadOnlyData())
}

func (c requestCodec) Marshal(v any) (mem.BufferSlice, error) { return c.proto.Marshal(v) }

func (requestCodec) Name() string { return "proto" }
