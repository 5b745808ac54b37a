// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package queuecompress

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension/xextension/storage"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/storagetest"
)

// repetitive is what a queued OTLP request looks like to a compressor:
// the same names and attribute strings for every data point.
func repetitive(points int) []byte {
	var b bytes.Buffer
	b.WriteByte(0x0D) // a request payload starts with field 1, fixed32
	for i := range points {
		fmt.Fprintf(&b, "gpu.utilization\x12host.name\x1aworker-17\x22gpu.index%d\x29%08x", i%8, i)
	}
	return b.Bytes()
}

func TestEncodeShrinksAndDecodeRestores(t *testing.T) {
	value := repetitive(500)
	enc := Encode(nil, value)
	require.True(t, Compressed(enc))
	assert.Less(t, len(enc)*4, len(value), "a repetitive request compresses at least 4x")
	dec, err := Decode(enc)
	require.NoError(t, err)
	assert.Equal(t, value, dec)
}

func TestEncodeKeepsWhatCompressionDoesNotHelp(t *testing.T) {
	small := repetitive(20)[:MinBytes-1]
	assert.Equal(t, small, Encode(nil, small), "below MinBytes: stored as given")

	random := make([]byte, 4096)
	_, _ = rand.Read(random)
	random[0] = 0x0D
	enc := Encode(nil, random)
	assert.False(t, Compressed(enc), "incompressible: stored as given")
	assert.Equal(t, random, enc)
}

// A request stored before compression existed (an upgrade) reads as stored.
func TestDecodeLeavesPlainValues(t *testing.T) {
	for _, v := range [][]byte{nil, {}, {0x0D, 1, 0, 0, 0}, {0x0A, 3, 'a', 'b', 'c'}, repetitive(50)} {
		dec, err := Decode(v)
		require.NoError(t, err)
		assert.Equal(t, v, dec)
	}
}

func TestDecodeRejectsDamagedValues(t *testing.T) {
	enc := Encode(nil, repetitive(500))
	_, err := Decode(enc[:len(enc)/2])
	require.Error(t, err, "a truncated block")

	// A header claiming 1 GiB: refused before anything is allocated.
	huge := binary.AppendUvarint([]byte(prefix), 1<<30)
	_, err = Decode(append(huge, 0, 0, 0))
	require.ErrorIs(t, err, ErrTooLarge)
}

func digitsOnly(key string) bool {
	for _, c := range key {
		if c < '0' || c > '9' {
			return false
		}
	}
	return key != ""
}

func TestClientCompressesTheSelectedKeysOnly(t *testing.T) {
	ctx := context.Background()
	inner := storagetest.NewClient(nil)
	c := NewClient(inner, digitsOnly)
	item, meta := repetitive(400), repetitive(300)

	require.NoError(t, c.Set(ctx, "7", item))
	setItem, setMeta := storage.SetOperation("8", item), storage.SetOperation("qmv0", meta)
	require.NoError(t, c.Batch(ctx, setItem, setMeta))
	assert.Equal(t, item, setItem.Value, "the caller's operation is as it gave it")

	assert.True(t, Compressed(inner.Value("7")))
	assert.True(t, Compressed(inner.Value("8")))
	assert.Equal(t, meta, inner.Value("qmv0"), "the queue's metadata is stored as given")

	got, err := c.Get(ctx, "7")
	require.NoError(t, err)
	assert.Equal(t, item, got)
	get8, getMeta, getNone := storage.GetOperation("8"), storage.GetOperation("qmv0"), storage.GetOperation("9")
	require.NoError(t, c.Batch(ctx, get8, getMeta, getNone))
	assert.Equal(t, item, get8.Value)
	assert.Equal(t, meta, getMeta.Value)
	assert.Nil(t, getNone.Value)
}

// What an earlier release stored, uncompressed, reads as stored; a
// damaged compressed value is handed on as stored, for the queue to reject
// as any damaged request.
func TestClientReadsPlainAndDamagedValuesAsStored(t *testing.T) {
	ctx := context.Background()
	item := repetitive(400)
	damaged := Encode(nil, item)
	damaged = damaged[:len(damaged)-10]
	inner := storagetest.NewClient(map[string][]byte{"3": item, "4": damaged})
	c := NewClient(inner, digitsOnly)
	got, err := c.Get(ctx, "3")
	require.NoError(t, err)
	assert.Equal(t, item, got)
	got, err = c.Get(ctx, "4")
	require.NoError(t, err)
	assert.Equal(t, damaged, got)
}

type memStorage struct {
	component.StartFunc
	component.ShutdownFunc
	clients map[string]*storagetest.Client
}

func (s *memStorage) GetClient(_ context.Context, kind component.Kind, id component.ID, name string) (storage.Client, error) {
	k := kind.String() + "/" + id.String() + "/" + name
	if s.clients[k] == nil {
		s.clients[k] = storagetest.NewClient(nil)
	}
	return s.clients[k], nil
}

type extensionsHost struct {
	component.Host
	exts map[component.ID]component.Component
}

func (h extensionsHost) GetExtensions() map[component.ID]component.Component { return h.exts }

func TestHostWrapsOnlyTheQueuesClient(t *testing.T) {
	ctx := context.Background()
	storageID, other := component.MustNewIDWithName("file_storage", "queue"), component.MustNewID("health_check")
	owner := component.MustNewID("cloudwatch")
	ext := &memStorage{clients: map[string]*storagetest.Client{}}
	healthCheck := &memStorage{} // any other extension
	exts := map[component.ID]component.Component{storageID: ext, other: healthCheck}
	h := NewHost(extensionsHost{Host: componenttest.NewNopHost(), exts: exts}, storageID, owner, "metrics", digitsOnly)

	got := h.GetExtensions()
	require.Len(t, got, 2)
	assert.Same(t, healthCheck, got[other])
	assert.Same(t, ext, exts[storageID].(*memStorage), "the host's own map is not changed")
	st := got[storageID].(storage.Extension)

	queue, err := st.GetClient(ctx, component.KindExporter, owner, "metrics")
	require.NoError(t, err)
	assert.IsType(t, &Client{}, queue)
	for _, c := range []struct {
		kind  component.Kind
		id    component.ID
		name  string
		label string
	}{
		{component.KindExporter, owner, "cumulative_state", "the exporter's other client"},
		{component.KindExporter, component.MustNewID("otlp"), "metrics", "another exporter's queue"},
		{component.KindProcessor, owner, "metrics", "another kind"},
	} {
		client, err := st.GetClient(ctx, c.kind, c.id, c.name)
		require.NoError(t, err)
		assert.IsType(t, &storagetest.Client{}, client, c.label)
	}

	missing := NewHost(extensionsHost{Host: componenttest.NewNopHost(), exts: map[component.ID]component.Component{other: healthCheck}}, storageID, owner, "metrics", digitsOnly)
	_, ok := missing.GetExtensions()[storageID]
	assert.False(t, ok, "no storage: nothing is made up")
}

func TestValuesGivenToAStorageAreNeverReused(t *testing.T) {
	ctx := context.Background()
	inner := storagetest.NewClient(nil)
	inner.KeepValues = true // as the storage API allows
	c := NewClient(inner, digitsOnly)
	items := [][]byte{repetitive(400), repetitive(300), repetitive(500)}
	for i, item := range items {
		require.NoError(t, c.Batch(ctx, storage.SetOperation(fmt.Sprint(i), item)))
	}
	for i, item := range items {
		got, err := Decode(inner.Value(fmt.Sprint(i)))
		require.NoError(t, err)
		assert.Equal(t, item, got, "item %d is intact after the later writes", i)
	}
}
