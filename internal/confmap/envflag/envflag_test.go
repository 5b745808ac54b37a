// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package envflag

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBool(t *testing.T) {
	const name = "GPUBUILD_TEST_SWITCH"
	for _, tc := range []struct {
		value    string
		set, def bool
		want     bool
		err      string
	}{
		{set: false, def: true, want: true},
		{set: false, def: false, want: false},
		{value: "", set: true, def: true, want: true},
		{value: "  ", set: true, def: false, want: false},
		{value: "true", set: true, want: true},
		{value: " FALSE ", set: true, def: true, want: false},
		{value: "0", set: true, def: true, want: false},
		{value: "1", set: true, want: true},
		{value: "maybe", set: true, def: true, err: `GPUBUILD_TEST_SWITCH: "maybe" is not a boolean (use true or false)`},
	} {
		got, err := Bool(func(n string) (string, bool) {
			assert.Equal(t, name, n)
			return tc.value, tc.set
		}, name, tc.def)
		if tc.err != "" {
			require.EqualError(t, err, tc.err)
			continue
		}
		require.NoError(t, err, "%q", tc.value)
		assert.Equal(t, tc.want, got, "%q (set %v, default %v)", tc.value, tc.set, tc.def)
	}
}
