// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cumulative // import "github.com/gpubuild/otelcol-gpubuild/internal/cumulative"

import (
	"math"

	"github.com/cespare/xxhash/v2"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// hashMap hashes attributes independently of their order.
//
// Series keys are saved with the state (Attach), so these hashes must
// not change between versions (or processes): xxhash64 of the strings, no
// random seed.
func hashMap(m pcommon.Map) uint64 {
	var sum uint64
	for k, v := range m.All() {
		sum += mix(xxhash.Sum64String(k), hashValue(v))
	}
	return sum
}

func hashValue(v pcommon.Value) uint64 {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return xxhash.Sum64String(v.Str())
	case pcommon.ValueTypeInt:
		return mix(uint64(v.Int()), 1)
	case pcommon.ValueTypeDouble:
		return mix(math.Float64bits(v.Double()), 2)
	case pcommon.ValueTypeBool:
		if v.Bool() {
			return mix(1, 3)
		}
		return mix(0, 3)
	default:
		return xxhash.Sum64String(v.AsString())
	}
}

func hashStrings(a, b string) uint64 {
	return mix(xxhash.Sum64String(a), xxhash.Sum64String(b))
}

// mix combines hashes, order-dependently (splitmix64 finalizer per step).
func mix(hs ...uint64) uint64 {
	var h uint64 = 0x9e3779b97f4a7c15
	for _, v := range hs {
		h ^= v + 0x9e3779b97f4a7c15 + (h << 6) + (h >> 2)
		h ^= h >> 30
		h *= 0xbf58476d1ce4e5b9
		h ^= h >> 27
		h *= 0x94d049bb133111eb
		h ^= h >> 31
	}
	return h
}
