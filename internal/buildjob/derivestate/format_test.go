// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derivestate

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/runmemory"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/storagetest"
)

// The fixtures hold the state the derivation wrote (derive's
// writeFixtureState) after job-7 and job-8 succeeded, not yet flushed, and
// while job-9 was active; state_v1_job_keys_by_id.txt is the same state as
// the versions before the ordered job keys wrote it.
const (
	fixturePath     = "testdata/state_v1.txt"
	fixtureByIDPath = "testdata/state_v1_job_keys_by_id.txt"
)

// fixtureTime is when the fixture's runs were counted.
var fixtureTime = time.Date(2026, time.March, 2, 10, 0, 0, 0, time.UTC)

// fixtureLayout is the connector's default configuration, which wrote the
// fixtures: no dimensions, 15 job duration bounds (16 buckets).
var fixtureLayout = Layout{Buckets: []int{16, 16, 15}, Runs: true, JobTimeout: time.Hour}

func loadFixtureFile(t testing.TB, path string) map[string][]byte {
	entries, err := storagetest.ReadEntries(path)
	require.NoError(t, err)
	return entries
}

// Every entry of both fixtures decodes to what the derivation had, and
// encodes back to the same bytes: format 1 is read and written unchanged.
func TestFormatOneFixtureEntriesEncodeBackToTheirBytes(t *testing.T) {
	for _, path := range []string{fixturePath, fixtureByIDPath} {
		entries := loadFixtureFile(t, path)
		var jobs []string
		seen := map[string]bool{}
		for key, v := range entries {
			switch {
			case key == KeyMeta:
				start, err := decodeMeta(v)
				require.NoError(t, err)
				assert.Equal(t, v, encodeMeta(start), path)
				seen["meta"] = true
			case strings.HasPrefix(key, KeyResPrefix):
				attrs, err := decodeResource(v)
				require.NoError(t, err)
				name, _ := attrs.Get("service.name")
				assert.Equal(t, "vector-index-build", name.Str())
				encoded := encodeAttributes(attrs)
				assert.Equal(t, key, resourceKey(encoded), "the key is the hash of the attributes")
				assert.Equal(t, v, encodeResource(encoded), path)
				seen["res"] = true
			case strings.HasPrefix(key, KeySeriesPrefix):
				s, err := DecodeSeries(v, &fixtureLayout)
				require.NoError(t, err)
				assert.Equal(t, Series{Family: 0, A: "success", Resource: s.Resource, Dims: []Dim{}, Count: 2, Hist: s.Hist}, *s, "job-7 and job-8 succeeded")
				assert.Equal(t, uint64(2), s.Hist.N)
				assert.InDelta(t, 60.0+90.0, s.Hist.Sum, 1e-9)
				assert.Contains(t, entries, s.Resource)
				assert.Equal(t, v, EncodeSeries(nil, s), path)
				seen["series"] = true
			default:
				seq, k, ok := parseJobKey(key)
				require.True(t, ok, "%q is a job key", key)
				if seq > 0 {
					assert.Equal(t, key, JobKey(seq, k))
				}
				runs, err := decodeJob(v, 0)
				require.NoError(t, err)
				require.Len(t, runs, 1)
				want := runmemory.Ended
				if k.JobID == "job-9" {
					want = runmemory.Active
				}
				assert.Equal(t, want, runs[0].State, k.JobID)
				assert.Contains(t, entries, runs[0].Resource)
				assert.Equal(t, v, EncodeJob(nil, runs), path)
				jobs = append(jobs, k.JobID)
			}
		}
		assert.ElementsMatch(t, []string{"job-7", "job-8", "job-9"}, jobs, path)
		assert.Len(t, seen, 3, path)
	}
}

// An entry of any kind whose format byte this version does not know is
// skipped as an unknown version (the first failure of a read sticks), not
// as corrupted.
func TestStateUnknownFormatByteOfEveryEntry(t *testing.T) {
	run := Run{State: runmemory.Ended, Start: 1, End: 2, Result: "success", ListedAt: fixtureTime, Resource: "res/00000000000000ff"}
	attrs := pcommon.NewMap()
	attrs.PutStr("service.name", "vector-index-build")
	for name, tc := range map[string]struct {
		entry  []byte
		decode func([]byte) error
	}{
		"meta": {encodeMeta(5), func(v []byte) error { _, err := decodeMeta(v); return err }},
		"resource": {encodeResource(encodeAttributes(attrs)), func(v []byte) error {
			_, err := decodeResource(v)
			return err
		}},
		"job": {EncodeJob(nil, []Run{run}), func(v []byte) error {
			_, err := decodeJob(v, 0)
			return err
		}},
		"series": {EncodeSeries(nil, &Series{A: "success", Resource: "res/00000000000000ff", Count: 5}), func(v []byte) error {
			_, err := DecodeSeries(v, &Layout{Buckets: []int{1}})
			return err
		}},
	} {
		require.NoError(t, tc.decode(tc.entry), "%s as written", name)
		tc.entry[0] = FormatV1 + 1
		assert.ErrorIs(t, tc.decode(tc.entry), ErrUnknownVersion, name)
	}
}

// A dimension of another type than a string keeps its type and value.
func TestDimensionsOfEveryKindComeBack(t *testing.T) {
	other := pcommon.NewValueInt(42)
	dims := []Dim{{}, {Kind: DimString, Str: "cagra"}, {Kind: DimOther, Other: other}}
	v := EncodeSeries(nil, &Series{Family: 1, A: "load", B: "success", Resource: "res/00000000000000ff", Dims: dims, Count: 1})
	s, err := DecodeSeries(v, &Layout{Dims: 3, Buckets: []int{1, 1}})
	require.NoError(t, err)
	require.Len(t, s.Dims, 3)
	assert.Equal(t, DimUnset, s.Dims[0].Kind)
	assert.Equal(t, "cagra", s.Dims[1].Str)
	assert.Equal(t, DimOther, s.Dims[2].Kind)
	assert.True(t, other.Equal(s.Dims[2].Other))

	_, err = DecodeSeries(v, &Layout{Dims: 2, Buckets: []int{1, 1}})
	assert.Error(t, err, "another number of dimensions does not fit")
	_, err = DecodeSeries(v, &Layout{Dims: 3, Buckets: []int{1}})
	assert.Error(t, err, "an unknown family does not fit")
}

// Whatever a value holds, decoding it does not panic, and what decodes
// encodes to a value that decodes the same: the fixture's entries and
// garbage alike.
func FuzzDecode(f *testing.F) {
	for _, v := range loadFixtureFile(f, fixturePath) {
		f.Add(v)
	}
	f.Add([]byte{})
	f.Add([]byte{FormatV1})
	f.Fuzz(func(t *testing.T, v []byte) {
		if s, err := DecodeSeries(v, &fixtureLayout); err == nil {
			again, err := DecodeSeries(EncodeSeries(nil, s), &fixtureLayout)
			require.NoError(t, err)
			assert.Equal(t, s.Count, again.Count)
			assert.Equal(t, s.Hist.Counts, again.Hist.Counts)
		}
		if runs, err := decodeJob(v, fixtureLayout.Dims); err == nil {
			again, err := decodeJob(EncodeJob(nil, runs), fixtureLayout.Dims)
			require.NoError(t, err)
			require.Len(t, again, len(runs))
			for i := range runs {
				assert.Equal(t, runs[i].State, again[i].State)
				assert.Equal(t, runs[i].ListedAt.UnixNano(), again[i].ListedAt.UnixNano())
			}
		}
		if start, err := decodeMeta(v); err == nil {
			again, err := decodeMeta(encodeMeta(start))
			require.NoError(t, err)
			assert.Equal(t, start, again)
		}
		_, _ = decodeResource(v)
	})
}
