// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cumulative

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/extension/xextension/storage"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/storagetest"
)

// keysWithPrefix lists the keys of client's entries that start with prefix.
func keysWithPrefix(client *storagetest.Client, prefix string) []string {
	var keys []string
	for k := range client.Data() {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// twoIntervals saves, through a tracker attached to a new client, two
// points of series "a" and "b" of the "latency" histogram with bounds.
func twoIntervals(t *testing.T, bounds []float64) *storagetest.Client {
	t.Helper()
	client := storagetest.NewClient(nil)
	c, _ := newObserved(testConfig)
	c.Attach(context.Background(), client, testNow)
	convert(t, c, histograms(0, histogramPoint{"a", bounds, []uint64{1, 1, 1, 1}}, histogramPoint{"b", bounds, []uint64{2, 2, 2, 2}}), testNow)
	convert(t, c, histograms(time.Second, histogramPoint{"a", bounds, []uint64{2, 2, 2, 2}}, histogramPoint{"b", bounds, []uint64{3, 3, 3, 3}}), testNow)
	return client
}

// assertThirdIntervalExact restarts on client and checks the deltas of the
// third point of "a" and "b" (see twoIntervals).
func assertThirdIntervalExact(t *testing.T, client storage.Client, bounds []float64) Load {
	t.Helper()
	c, _ := newObserved(testConfig)
	load := c.Attach(context.Background(), client, testNow)
	md := histograms(2*time.Second, histogramPoint{"a", bounds, []uint64{3, 4, 5, 6}}, histogramPoint{"b", bounds, []uint64{3, 3, 3, 4}})
	convert(t, c, md, testNow)
	assert.Equal(t, map[string][]uint64{"a": {1, 2, 3, 4}, "b": {0, 0, 0, 1}}, sentBuckets(md))
	return load
}

// The bounds of the series of one histogram are saved once, in a layout
// entry the series entries refer to; a restart goes on from them exactly.
func TestSavedSeriesReferToOneLayoutEntry(t *testing.T) {
	bounds := []float64{1, 5, 10}
	client := twoIntervals(t, bounds)

	assert.Equal(t, []string{layoutStorageKey(hashBounds(bounds))}, keysWithPrefix(client, LayoutKeyPrefix))
	five := binary.LittleEndian.AppendUint64(nil, math.Float64bits(5))
	series := keysWithPrefix(client, SeriesKeyPrefix)
	require.Len(t, series, 2)
	for _, k := range series {
		assert.False(t, bytes.Contains(client.Value(k), five), "%s holds the bounds", k)
	}
	assert.Equal(t, Load{Restored: 2, Listed: true}, assertThirdIntervalExact(t, client, bounds))
}

// Every save that writes a series entry writes the layout it refers to,
// so a layout lost (or never written: a failed batch) is written again
// with the next point of any series that has it.
func TestEverySaveWritesTheLayoutsItsEntriesReferTo(t *testing.T) {
	bounds := []float64{1, 5, 10}
	client := storagetest.NewClient(nil)
	c, _ := newObserved(testConfig)
	c.Attach(context.Background(), client, testNow)
	convert(t, c, histograms(0, histogramPoint{"a", bounds, []uint64{1, 1, 1, 1}}, histogramPoint{"b", bounds, []uint64{2, 2, 2, 2}}), testNow)
	layoutKey := layoutStorageKey(hashBounds(bounds))
	require.NoError(t, client.Delete(context.Background(), layoutKey))

	convert(t, c, histograms(time.Second, histogramPoint{"a", bounds, []uint64{2, 2, 2, 2}}), testNow)
	assert.Equal(t, []string{layoutKey}, keysWithPrefix(client, LayoutKeyPrefix))
	convert(t, c, histograms(time.Second, histogramPoint{"b", bounds, []uint64{3, 3, 3, 3}}), testNow)
	assert.Equal(t, Load{Restored: 2, Listed: true}, assertThirdIntervalExact(t, client, bounds))
}

// A series entry whose layout is missing or unreadable is a read error:
// its next point is a baseline, never its whole total, and the point after
// is a delta; the layout is written again with it.
func TestSeriesWithoutItsLayoutIsABaseline(t *testing.T) {
	bounds := []float64{1, 5, 10}
	layoutKey := layoutStorageKey(hashBounds(bounds))
	for name, damage := range map[string]func(c *storagetest.Client){
		"missing":    func(c *storagetest.Client) { require.NoError(t, c.Delete(context.Background(), layoutKey)) },
		"truncated":  func(c *storagetest.Client) { setValue(t, c, layoutKey, c.Value(layoutKey)[:5]) },
		"other hash": func(c *storagetest.Client) { setValue(t, c, layoutKey, appendLayout(nil, []float64{1, 5, 11})) },
	} {
		t.Run(name, func(t *testing.T) {
			client := twoIntervals(t, bounds)
			damage(client)
			c, _ := newObserved(testConfig)
			load := c.Attach(context.Background(), client, testNow)
			assert.Equal(t, 2, load.Restored, "kept as unknown")
			assert.GreaterOrEqual(t, load.ReadErrors, int64(2), "both series")

			md := histograms(2*time.Second, histogramPoint{"a", bounds, []uint64{3, 4, 5, 6}})
			r := convert(t, c, md, testNow)
			assert.Empty(t, sentBuckets(md), "not its total again")
			assert.Equal(t, 1, r.Dropped[ReasonBaseline])
			md = histograms(3*time.Second, histogramPoint{"a", bounds, []uint64{4, 5, 6, 7}})
			convert(t, c, md, testNow)
			assert.Equal(t, map[string][]uint64{"a": {1, 1, 1, 1}}, sentBuckets(md))
			got, err := decodeLayout(client.Value(layoutKey), hashBounds(bounds))
			require.NoError(t, err, "written again")
			assert.Equal(t, bounds, got)
		})
	}
}

func setValue(t *testing.T, c *storagetest.Client, key string, value []byte) {
	t.Helper()
	require.NoError(t, c.Set(context.Background(), key, slices.Clone(value)))
}

// At start, layout entries that no saved series refers to (their series
// forgotten, or unreadable) are deleted; the ones in use stay.
func TestUnusedLayoutsAreDeletedAtStart(t *testing.T) {
	bounds := []float64{1, 5, 10}
	client := twoIntervals(t, bounds)
	unused := layoutStorageKey(hashBounds([]float64{7, 8}))
	setValue(t, client, unused, appendLayout(nil, []float64{7, 8}))
	unreadable := layoutStorageKey(42)
	setValue(t, client, unreadable, []byte{2, 9})

	c, _ := newObserved(testConfig)
	load := c.Attach(context.Background(), client, testNow)
	assert.Equal(t, Load{Restored: 2, Listed: true, ReadErrors: 1}, load)
	require.NoError(t, c.Close(context.Background()))
	assert.Equal(t, []string{layoutStorageKey(hashBounds(bounds))}, keysWithPrefix(client, LayoutKeyPrefix))
}

// reverseWalker lists its entries in reverse key order: a storage.Walker
// need not list them sorted, so a series may come before its layout.
type reverseWalker struct{ *storagetest.Client }

func (w reverseWalker) Walk(ctx context.Context, fn storage.WalkFunc) error {
	type entry struct {
		key   string
		value []byte
	}
	var entries []entry
	if err := w.Client.Walk(ctx, func(k string, v []byte) ([]*storage.Operation, error) {
		entries = append(entries, entry{k, slices.Clone(v)})
		return nil, nil
	}); err != nil {
		return err
	}
	for _, e := range slices.Backward(entries) {
		if _, err := fn(e.key, e.value); err != nil {
			return err
		}
	}
	return nil
}

func TestSeriesListedBeforeTheirLayoutAreRestored(t *testing.T) {
	bounds := []float64{1, 5, 10}
	client := twoIntervals(t, bounds)
	assert.Equal(t, Load{Restored: 2, Listed: true}, assertThirdIntervalExact(t, reverseWalker{client}, bounds))
}

// getOnly hides Walk: the tracker reads each series (and its layout) with
// Get when its first point arrives.
type getOnly struct{ storage.Client }

func TestSeriesReadOneByOneFindTheirLayout(t *testing.T) {
	bounds := []float64{1, 5, 10}
	client := twoIntervals(t, bounds)
	assert.Equal(t, Load{}, assertThirdIntervalExact(t, getOnly{client}, bounds))
}

// Past maxLayouts distinct bounds, a series' bounds are saved in its own
// entry, and restored as exactly as a shared layout.
func TestLayoutsBeyondTheCapAreSavedInline(t *testing.T) {
	cfg := testConfig
	cfg.MaxSeries = 2 * maxLayouts
	client := storagetest.NewClient(nil)
	c, _ := newObserved(cfg)
	c.Attach(context.Background(), client, testNow)
	n := maxLayouts + 20
	first, second, third := make([]histogramPoint, n), make([]histogramPoint, n), make([]histogramPoint, n)
	for i := range n {
		bounds := []float64{float64(i), float64(i + 1)}
		first[i] = histogramPoint{fmt.Sprint(i), bounds, []uint64{1, 1, 1}}
		second[i] = histogramPoint{fmt.Sprint(i), bounds, []uint64{2, 3, uint64(4 + i)}}
		third[i] = histogramPoint{fmt.Sprint(i), bounds, []uint64{3, 5, uint64(7 + 2*i)}}
	}
	convert(t, c, histograms(0, first...), testNow)
	convert(t, c, histograms(time.Second, second...), testNow)
	assert.Len(t, keysWithPrefix(client, LayoutKeyPrefix), maxLayouts)

	restarted, _ := newObserved(cfg)
	load := restarted.Attach(context.Background(), client, testNow)
	assert.Equal(t, Load{Restored: n, Listed: true}, load)
	md := histograms(2*time.Second, third...)
	convert(t, restarted, md, testNow)
	sent := sentBuckets(md)
	require.Len(t, sent, n)
	for i := range n {
		assert.Equal(t, []uint64{1, 2, uint64(3 + i)}, sent[fmt.Sprint(i)], "series %d", i)
	}
}
