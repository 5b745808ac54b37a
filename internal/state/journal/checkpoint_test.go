// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// hookedClient runs onBatch (when set) before each storage transaction.
type hookedClient struct {
	*countingClient
	onBatch func()
}

func (c *hookedClient) Batch(ctx context.Context, ops ...*storage.Operation) error {
	if c.onBatch != nil {
		c.onBatch()
	}
	return c.countingClient.Batch(ctx, ops...)
}

// A journal cut short under a checkpoint (by another process) fails the
// checkpoint, after its first transaction; the index is kept for the next
// attempt.
func TestCheckpointOfAJournalCutShortFails(t *testing.T) {
	ctx := context.Background()
	base := &hookedClient{countingClient: newBase()}
	c, _ := open(t, base, t.TempDir()+"/state.journal")
	c.IndexAppends()
	c.now = func() time.Time { return c.lastCheckpoint }
	rng := rand.New(rand.NewPCG(3, 3))
	keys := make([]string, 3000)
	for i := range keys {
		keys[i] = fmt.Sprintf("jobs/%016x", rng.Uint64())
		require.NoError(t, c.Batch(ctx, storage.SetOperation(keys[i], make([]byte, 300))))
	}
	base.onBatch = func() {
		require.NoError(t, os.Truncate(c.path, headerSize))
		base.onBatch = nil
	}
	err := c.Checkpoint(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "reading the journal")
	assert.Equal(t, 1, base.batches, "the first transaction went in")
	assert.Equal(t, len(keys), c.index.len(), "the index is kept")
	_, ok := c.index.get(keys[0])
	assert.True(t, ok, "and finds its keys")
}
