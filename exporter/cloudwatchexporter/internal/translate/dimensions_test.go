// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

func TestSanitizeDimension(t *testing.T) {
	tests := []struct {
		in, wantName, wantValue string
		nameOK, valueOK         bool
	}{
		{"gpu.uuid", "gpu.uuid", "gpu.uuid", true, true},
		{"", "", "", false, false},
		{"   ", "   ", "   ", false, false},
		{":leading", "_leading", ":leading", true, true},
		{"tab\there", "tab_here", "tab_here", true, true},
		{"größe", "gr__e", "gr__e", true, true},
		{"日本", "__", "__", true, true},
	}
	for _, tt := range tests {
		name, ok := sanitizeDimensionName(tt.in)
		assert.Equal(t, tt.nameOK, ok, "name %q", tt.in)
		if ok {
			assert.Equal(t, tt.wantName, name)
		}
		value, ok := sanitizeDimensionValue(tt.in)
		assert.Equal(t, tt.valueOK, ok, "value %q", tt.in)
		if ok {
			assert.Equal(t, tt.wantValue, value)
		}
	}

	long := strings.Repeat("a", 2000)
	name, _ := sanitizeDimensionName(long)
	value, _ := sanitizeDimensionValue(long)
	assert.Len(t, name, 255)
	assert.Len(t, value, 1024)
	// Non-ASCII beyond the limit: cut after replacement, still deterministic.
	value, _ = sanitizeDimensionValue(strings.Repeat("ü", 1500))
	assert.Equal(t, strings.Repeat("_", 1024), value)
}

func TestAppendDimensions(t *testing.T) {
	res := pcommon.NewResource()
	res.Attributes().PutStr("service.name", "svc")
	res.Attributes().PutStr("gpu.uuid", "GPU-RES")
	res.Attributes().PutStr("service.instance.id", "i-1")
	res.Attributes().PutStr("gpu.model", "") // empty: not a dimension
	resDims, _ := resourceDimensions(nil, res, []string{"service.name", "gpu.uuid", "gpu.model", "absent"})
	assert.Equal(t, []Dimension{{"service.name", "svc"}, {"gpu.uuid", "GPU-RES"}}, resDims)

	attrs := pcommon.NewMap()
	attrs.PutStr("gpu.uuid", "GPU-POINT") // overrides the resource's
	attrs.PutInt("gpu.index", 3)
	attrs.PutInt("big", 100_000)
	attrs.PutBool("mig", true)
	attrs.PutDouble("ratio", 0.5)
	attrs.PutStr("blank", " ")

	var noFilter dimensionFilter
	got, _ := appendDimensions(nil, resDims, attrs, &noFilter)
	assert.Equal(t, []Dimension{
		{"big", "100000"},
		{"gpu.index", "3"},
		{"gpu.uuid", "GPU-POINT"},
		{"mig", "true"},
		{"ratio", "0.5"},
		{"service.name", "svc"},
	}, got)

	// appending after existing content leaves it alone
	prefix := []Dimension{{"x", "y"}}
	got, _ = appendDimensions(prefix, resDims, pcommon.NewMap(), &dimensionFilter{exclude: []string{"gpu.uuid"}})
	assert.Equal(t, []Dimension{{"x", "y"}, {"service.name", "svc"}}, got)
}

func TestAppendDimensionsKeepsAtMost30(t *testing.T) {
	resDims := []Dimension{{"zz.service", "svc"}}
	attrs := pcommon.NewMap()
	// 35 attributes inserted in descending order: a34 ... a00.
	for i := 34; i >= 0; i-- {
		attrs.PutStr(fmt.Sprintf("a%02d", i), "v")
	}
	got, _ := appendDimensions(nil, resDims, attrs, &dimensionFilter{})
	assert.Len(t, got, 30)
	// The resource dimension is kept, plus the 29 smallest attribute names.
	want := []Dimension{}
	for i := 0; i < 29; i++ {
		want = append(want, Dimension{fmt.Sprintf("a%02d", i), "v"})
	}
	want = append(want, Dimension{"zz.service", "svc"})
	assert.Equal(t, want, got)

	// Same attributes in another order: same dimensions.
	other := pcommon.NewMap()
	for i := 0; i < 35; i++ {
		other.PutStr(fmt.Sprintf("a%02d", i), "v")
	}
	got, _ = appendDimensions(nil, resDims, other, &dimensionFilter{})
	assert.Equal(t, want, got)
}
