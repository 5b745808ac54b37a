// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package requestid

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

func resources(n int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	for range n {
		md.ResourceMetrics().AppendEmpty().Resource().Attributes().PutStr("service.name", "s")
	}
	return md
}

func TestStampAndTake(t *testing.T) {
	md := resources(2)
	Stamp(md, ID{Instance: "abc", Sequence: 42})
	id, ok, err := Take(md)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, ID{Instance: "abc", Sequence: 42}, id)
	for i := range 2 {
		assert.Equal(t, map[string]any{"service.name": "s"}, md.ResourceMetrics().At(i).Resource().Attributes().AsRaw())
	}
}

// TestMalformedStampsAreNotTrusted: a stamp that is incomplete, of the
// wrong type, or on only some resources gives no identity (the request is
// merged without the check) and is removed all the same.
func TestMalformedStampsAreNotTrusted(t *testing.T) {
	for name, edit := range map[string]func(pmetric.Metrics){
		"sequence alone": func(md pmetric.Metrics) {
			md.ResourceMetrics().At(0).Resource().Attributes().PutInt(SequenceAttribute, 1)
		},
		"instance alone": func(md pmetric.Metrics) {
			md.ResourceMetrics().At(0).Resource().Attributes().PutStr(InstanceAttribute, "a")
		},
		"sequence as a string": func(md pmetric.Metrics) {
			a := md.ResourceMetrics().At(0).Resource().Attributes()
			a.PutStr(InstanceAttribute, "a")
			a.PutStr(SequenceAttribute, "1")
		},
		"sequence zero": func(md pmetric.Metrics) {
			a := md.ResourceMetrics().At(0).Resource().Attributes()
			a.PutStr(InstanceAttribute, "a")
			a.PutInt(SequenceAttribute, 0)
		},
		"one resource of two": func(md pmetric.Metrics) {
			a := md.ResourceMetrics().At(0).Resource().Attributes()
			a.PutStr(InstanceAttribute, "a")
			a.PutInt(SequenceAttribute, 1)
			md.ResourceMetrics().AppendEmpty()
		},
	} {
		t.Run(name, func(t *testing.T) {
			md := resources(1)
			edit(md)
			_, ok, err := Take(md)
			assert.Error(t, err)
			assert.False(t, ok)
			for i := 0; i < md.ResourceMetrics().Len(); i++ {
				a := md.ResourceMetrics().At(i).Resource().Attributes()
				_, hasInst := a.Get(InstanceAttribute)
				_, hasSeq := a.Get(SequenceAttribute)
				assert.False(t, hasInst || hasSeq, "stamp removed")
			}
		})
	}
}
