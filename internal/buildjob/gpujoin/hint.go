// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package gpujoin joins a build job run (or stage) to the GPU samples of its
// window: which GPUs it used and its energy, busy time, peak memory and
// mean SM and tensor activity, shared with the runs that overlap it.
package gpujoin // import "github.com/gpubuild/otelcol-gpubuild/internal/buildjob/gpujoin"

import (
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/gpubuild/otelcol-gpubuild/internal/gpucost"
)

const (
	attrHWID     = "hw.id"
	attrGPUIndex = "gpu.index"
)

// Hint is the GPU a run's records name: hw.id (the UUID) wins over
// gpu.index.
type Hint struct {
	UUID     string
	Index    int64
	HasIndex bool
}

// None reports whether the records name no GPU.
func (h Hint) None() bool { return h.UUID == "" && !h.HasIndex }

// Own copies the UUID out of the input batch.
func (h Hint) Own() Hint {
	h.UUID = strings.Clone(h.UUID)
	return h
}

// Matches reports whether s is the GPU h names.
func (h Hint) Matches(s *gpucost.Series) bool {
	if h.UUID != "" {
		return h.UUID == s.UUID
	}
	return h.HasIndex && h.Index == int64(s.Index)
}

// HintFrom reads hw.id and gpu.index from a record's attributes.
func HintFrom(attrs pcommon.Map) Hint {
	var h Hint
	if v, ok := attrs.Get(attrHWID); ok && v.Type() == pcommon.ValueTypeStr {
		h.UUID = v.Str()
	}
	if v, ok := attrs.Get(attrGPUIndex); ok {
		switch v.Type() {
		case pcommon.ValueTypeInt:
			h.Index, h.HasIndex = v.Int(), v.Int() >= 0
		case pcommon.ValueTypeStr:
			if i, err := strconv.ParseInt(v.Str(), 10, 64); err == nil && i >= 0 {
				h.Index, h.HasIndex = i, true
			}
		}
	}
	return h
}
