// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package storagetest is an in-memory storage.Client for tests, and the
// real file_storage extension started for them (FileStorage).
package storagetest // import "github.com/gpubuild/otelcol-gpubuild/internal/testing/storagetest"

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"

	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// Client is a storage client over a map. It copies the values it is given,
// as file_storage does at commit, unless KeepValues is set (the storage API
// allows a client to keep them), and lists its entries in key order (Walk),
// as file_storage's clients can. It is safe for concurrent use.
type Client struct {
	// KeepValues: store the slices Set is given, not copies.
	KeepValues bool

	mu   sync.Mutex
	data map[string][]byte
}

// NewClient returns a client holding data (nil: nothing); the client takes
// the map over.
func NewClient(data map[string][]byte) *Client {
	if data == nil {
		data = map[string][]byte{}
	}
	return &Client{data: data}
}

// Value is what is stored under key, nil if nothing.
func (c *Client) Value(key string) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.data[key]
}

// Data is a copy of the map of everything stored.
func (c *Client) Data() map[string][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.data)
}

// Get implements storage.Client.
func (c *Client) Get(_ context.Context, key string) ([]byte, error) {
	return c.Value(key), nil
}

// Set implements storage.Client.
func (c *Client) Set(ctx context.Context, key string, value []byte) error {
	return c.Batch(ctx, storage.SetOperation(key, value))
}

// Delete implements storage.Client.
func (c *Client) Delete(ctx context.Context, key string) error {
	return c.Batch(ctx, storage.DeleteOperation(key))
}

// Batch implements storage.Client: the operations in order, at once.
func (c *Client) Batch(_ context.Context, ops ...*storage.Operation) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, op := range ops {
		switch op.Type {
		case storage.Get:
			op.Value = c.data[op.Key]
		case storage.Set:
			if c.KeepValues {
				c.data[op.Key] = op.Value
			} else {
				c.data[op.Key] = slices.Clone(op.Value)
			}
		case storage.Delete:
			delete(c.data, op.Key)
		}
	}
	return nil
}

// Close implements storage.Client; the data stays readable.
func (c *Client) Close(context.Context) error { return nil }

// Walk calls fn for each entry in key order, over the entries as they were
// when it was called, then applies the operations fn returned, as the
// storage API describes (SkipAll stops early and applies them; another
// error stops and applies none).
func (c *Client) Walk(ctx context.Context, fn storage.WalkFunc) error {
	snapshot := c.Data()
	var ops []*storage.Operation
	for _, k := range slices.Sorted(maps.Keys(snapshot)) {
		more, err := fn(k, slices.Clone(snapshot[k]))
		ops = append(ops, more...)
		if errors.Is(err, storage.SkipAll) {
			break
		}
		if err != nil {
			return err
		}
	}
	return c.Batch(ctx, ops...)
}
