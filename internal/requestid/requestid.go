// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package requestid is the identity a fleet sidecar stamps on each metrics
// request before its persistent queue (the requestid processor) and a
// gateway reads, to merge a request once however often it is sent (the
// intervalmerge processor).
//
// The identity is the sidecar process's random instance id and a sequence
// number, both as resource attributes on every ResourceMetrics of the
// request: OTLP has no request id, and resource attributes survive the
// sidecar's persistent queue and the OTLP exporter unchanged.
package requestid // import "github.com/gpubuild/otelcol-gpubuild/internal/requestid"

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

const (
	// InstanceAttribute names the stamping process: random, new at each
	// start, so a restarted sidecar never reuses a sequence number.
	InstanceAttribute = "gpubuild.request.instance"
	// SequenceAttribute numbers the process's requests from 1.
	SequenceAttribute = "gpubuild.request.sequence"
)

// ID identifies one request of one sidecar process.
type ID struct {
	Instance string
	Sequence uint64
}

// NewInstance returns a random instance id (128 bits, hex).
func NewInstance() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// Stamp puts id on every ResourceMetrics of md.
func Stamp(md pmetric.Metrics, id ID) {
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		attrs := rms.At(i).Resource().Attributes()
		attrs.PutStr(InstanceAttribute, id.Instance)
		attrs.PutInt(SequenceAttribute, int64(id.Sequence)) //nolint:gosec // sequences stay far below 2^63
	}
}

// ErrMixed is the error of a request whose ResourceMetrics carry different
// identities or only some carry one: something re-batched requests after
// they were stamped.
var ErrMixed = errors.New("the request's resources carry different request identities (requests were re-batched after the requestid processor)")

// Take reads the identity of md and removes the stamp from every
// ResourceMetrics. ok is false for a request without a stamp (a sender
// without the requestid processor); err is set for a malformed or mixed
// stamp (the stamp is removed all the same).
func Take(md pmetric.Metrics) (id ID, ok bool, err error) {
	rms := md.ResourceMetrics()
	stamped := 0
	for i := 0; i < rms.Len(); i++ {
		attrs := rms.At(i).Resource().Attributes()
		inst, hasInst := attrs.Get(InstanceAttribute)
		seq, hasSeq := attrs.Get(SequenceAttribute)
		if !hasInst && !hasSeq {
			continue
		}
		// Read before removing: Remove moves the map's entries. A missing
		// attribute's Value must not be read.
		var instStr string
		if hasInst {
			instStr = inst.AsString()
		}
		var seqInt int64
		seqIsInt := hasSeq && seq.Type() == pcommon.ValueTypeInt
		if seqIsInt {
			seqInt = seq.Int()
		}
		cur, e := parse(instStr, hasInst, seqInt, seqIsInt)
		attrs.Remove(InstanceAttribute)
		attrs.Remove(SequenceAttribute)
		if e != nil {
			err = e
			continue
		}
		if stamped > 0 && cur != id {
			err = ErrMixed
		}
		id = cur
		stamped++
	}
	if err == nil && stamped > 0 && stamped != rms.Len() {
		err = ErrMixed
	}
	if err != nil {
		return ID{}, false, err
	}
	return id, stamped > 0, nil
}

func parse(inst string, hasInst bool, seq int64, seqIsInt bool) (ID, error) {
	switch {
	case !hasInst || inst == "":
		return ID{}, fmt.Errorf("resource attribute %s missing beside %s", InstanceAttribute, SequenceAttribute)
	case !seqIsInt || seq <= 0:
		return ID{}, fmt.Errorf("resource attribute %s: want a positive integer", SequenceAttribute)
	}
	return ID{Instance: inst, Sequence: uint64(seq)}, nil
}
