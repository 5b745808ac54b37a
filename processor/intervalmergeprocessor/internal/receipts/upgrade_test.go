// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package receipts

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/requestid"
)

// testdata/v1.segment was written by the release before the shared record
// framing (internal/state/record): a request from sidecar-a, sequence 7,
// whose metrics are "metrics one", then one without an identity, "metrics
// two". It reads back the same.
func TestSegmentOfThePreviousReleaseLoads(t *testing.T) {
	type got struct {
		id      requestid.ID
		hasID   bool
		metrics string
	}
	var read []got
	records, discarded, err := Read("testdata/v1.segment", func(id requestid.ID, hasID bool, metrics []byte) error {
		read = append(read, got{id, hasID, string(metrics)})
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, 2, records)
	assert.Zero(t, discarded)
	assert.Equal(t, []got{
		{requestid.ID{Instance: "sidecar-a", Sequence: 7}, true, "metrics one"},
		{requestid.ID{}, false, "metrics two"},
	}, read)
}
