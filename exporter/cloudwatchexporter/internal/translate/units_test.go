// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/stretchr/testify/assert"
)

// Every unit CloudWatch knows fits a datum's byte and comes back unchanged.
func TestUnitIDRoundTrips(t *testing.T) {
	units := types.StandardUnit("").Values()
	assert.Less(t, len(units), 256)
	for _, u := range units {
		id := UnitIDOf(u)
		assert.NotZero(t, id, u)
		assert.Equal(t, u, id.standard())
	}
	assert.Equal(t, types.StandardUnit(""), UnitIDOf("").standard())
	assert.Equal(t, UnitID(0), UnitIDOf("Fortnights"))
}
