// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package storagetest

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/extension/xextension/storage"
)

func TestSetCopiesUnlessKeepValues(t *testing.T) {
	ctx := context.Background()
	for _, keep := range []bool{false, true} {
		c := NewClient(nil)
		c.KeepValues = keep
		v := []byte("abc")
		require.NoError(t, c.Set(ctx, "k", v))
		v[0] = 'x'
		got, err := c.Get(ctx, "k")
		require.NoError(t, err)
		if keep {
			assert.Equal(t, "xbc", string(got))
		} else {
			assert.Equal(t, "abc", string(got))
		}
	}
}

func TestWalkAppliesWhatItsFunctionReturns(t *testing.T) {
	ctx := context.Background()
	data := func() map[string][]byte {
		return map[string][]byte{"b": []byte("2"), "a": []byte("1"), "c": []byte("3")}
	}

	c := NewClient(data())
	var seen []string
	require.NoError(t, c.Walk(ctx, func(k string, _ []byte) ([]*storage.Operation, error) {
		seen = append(seen, k)
		return []*storage.Operation{storage.DeleteOperation(k)}, nil
	}))
	assert.Equal(t, []string{"a", "b", "c"}, seen, "key order")
	assert.Empty(t, c.Data(), "the operations are applied")

	c = NewClient(data())
	require.NoError(t, c.Walk(ctx, func(k string, _ []byte) ([]*storage.Operation, error) {
		return []*storage.Operation{storage.DeleteOperation(k)}, storage.SkipAll
	}))
	assert.Equal(t, map[string][]byte{"b": []byte("2"), "c": []byte("3")}, c.Data(), "SkipAll stops and applies")

	c = NewClient(data())
	boom := errors.New("boom")
	err := c.Walk(ctx, func(k string, _ []byte) ([]*storage.Operation, error) {
		if k == "b" {
			return nil, boom
		}
		return []*storage.Operation{storage.DeleteOperation(k)}, nil
	})
	require.ErrorIs(t, err, boom)
	assert.Equal(t, data(), c.Data(), "an error applies nothing")
}
