// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package nvmlapi

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestInitBackoffDoublesUpToMaxAndResets(t *testing.T) {
	waits := func(b *InitBackoff, n int) []time.Duration {
		out := make([]time.Duration, n)
		for i := range out {
			out[i] = b.Failed()
		}
		return out
	}
	m := time.Minute
	b := &InitBackoff{Initial: m, Max: 15 * m}
	assert.Equal(t, []time.Duration{m, 2 * m, 4 * m, 8 * m, 15 * m, 15 * m}, waits(b, 6))
	b.Reset()
	assert.Equal(t, []time.Duration{m, 2 * m}, waits(b, 2), "a success starts again at Initial")

	fixed := &InitBackoff{Initial: m, Max: m}
	assert.Equal(t, []time.Duration{m, m, m}, waits(fixed, 3), "Max == Initial: a fixed interval")
	below := &InitBackoff{Initial: m, Max: time.Second}
	assert.Equal(t, []time.Duration{m, m}, waits(below, 2), "never shorter than Initial")
	huge := &InitBackoff{Initial: time.Duration(1) << 61, Max: time.Duration(1<<63 - 1)}
	assert.Equal(t, []time.Duration{1 << 61, 1 << 62, 1<<63 - 1}, waits(huge, 3), "no overflow")
}
