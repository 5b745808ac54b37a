// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/golden/*.json from the translator's output")

const goldenNamespace = "GPUBuild/Golden"

// translateToRequests is the exporter's translation at testNow, default
// configuration: md (OTLP JSON, as the queue's consumer receives it, that
// is after the cumulative conversion) into the PutMetricData requests it
// packs, in the shape `aws cloudwatch put-metric-data --cli-input-json`
// reads (what the dry run writes).
func translateToRequests(t *testing.T, input string) []byte {
	t.Helper()
	raw, err := os.ReadFile(input)
	require.NoError(t, err)
	md, err := (&pmetric.JSONUnmarshaler{}).UnmarshalMetrics(raw)
	require.NoError(t, err)
	tr := translateAll(testConfig(), md)
	datums, reqs := tr.Datums, Pack(tr.Datums, goldenNamespace, nil)

	var lines bytes.Buffer
	for _, r := range reqs {
		line, err := DryRunJSON(goldenNamespace, datums[r.First:r.First+r.N])
		require.NoError(t, err)
		lines.Write(line)
		lines.WriteByte('\n')
	}
	requests := []json.RawMessage{}
	for line := range strings.Lines(lines.String()) {
		requests = append(requests, json.RawMessage(line))
	}
	out, err := json.MarshalIndent(requests, "", "  ")
	require.NoError(t, err)
	return append(out, '\n')
}

// Every testdata/translate/<case>.json translates to exactly
// testdata/golden/<case>.json; go test -run TestTranslateGolden -update
// rewrites the golden files (check the diff before committing it).
func TestTranslateGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/translate/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, inputs)
	for _, input := range inputs {
		name := filepath.Base(input)
		t.Run(strings.TrimSuffix(name, ".json"), func(t *testing.T) {
			got := translateToRequests(t, input)
			golden := filepath.Join("testdata", "golden", name)
			if *updateGolden {
				require.NoError(t, os.WriteFile(golden, got, 0o600))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "no golden file: run with -update")
			assert.Equal(t, string(want), string(got))
		})
	}
}

// readGolden reads a golden file's requests, keyed by metric name and the
// value of one of its dimensions ("" for none).
func readGolden(t *testing.T, name string) map[string]DryRunDatum {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "golden", name))
	require.NoError(t, err)
	var reqs []DryRunRequest
	require.NoError(t, json.Unmarshal(raw, &reqs))
	out := map[string]DryRunDatum{}
	for _, r := range reqs {
		require.Equal(t, goldenNamespace, r.Namespace)
		for _, d := range r.MetricData {
			key := d.MetricName
			for _, dim := range d.Dimensions {
				if strings.HasPrefix(dim.Name, "build.") {
					key += "/" + dim.Value
				}
			}
			require.NotContains(t, out, key)
			out[key] = d
		}
	}
	return out
}

// The golden files were checked by hand once; these are the values worked
// out from the inputs and CloudWatch's semantics, so that a golden file
// rewritten with -update cannot silently take a wrong value.
func TestGoldenValuesHandChecked(t *testing.T) {
	sums := readGolden(t, "gauges_and_sums.json")
	// Dimensions: the default resource_to_dimensions (service.name,
	// deployment.environment.name, hw.id, gpu.index, hw.model) that the
	// resource has, then the point's attributes, sorted by name;
	// service.instance.id is never one (a restart would start new series).
	assert.Equal(t, []DryRunDimension{{"deployment.environment.name", "prod"}, {"hw.id", "GPU-0"}, {"service.name", "vector-index-build"}},
		sums["gpu.utilization"].Dimensions)
	// "1" is a ratio: CloudWatch unit None, the value as it is.
	assert.Equal(t, 0.375, *sums["gpu.utilization"].Value)
	assert.Equal(t, "None", sums["gpu.utilization"].Unit)
	// MiBy is CloudWatch's Megabytes (it has one unit for both prefixes).
	assert.Equal(t, 1024.0, *sums["gpu.memory.used"].Value)
	assert.Equal(t, "Megabytes", sums["gpu.memory.used"].Unit)
	// CloudWatch has no nanoseconds: 2,500,000 ns are 2,500 Microseconds.
	assert.Equal(t, 2500.0, *sums["build.queue.wait"].Value)
	assert.Equal(t, "Microseconds", sums["build.queue.wait"].Unit)
	// A delta counter is sent as its increment, one series per attribute
	// set; {job} is a count. CloudWatch's Sum over the minute is 3 + 1.
	assert.Equal(t, 3.0, *sums["build.jobs/success"].Value)
	assert.Equal(t, 1.0, *sums["build.jobs/failure"].Value)
	assert.Equal(t, "Count", sums["build.jobs/success"].Unit)
	// An up-down counter is its current value, cumulative as it is.
	assert.Equal(t, 2.0, *sums["build.jobs.active"].Value)
	// A monotonic cumulative sum must have been converted before the
	// queue; left cumulative it is dropped, not sent as a total.
	assert.NotContains(t, sums, "requests")
	// Timestamps to the millisecond, UTC; standard resolution (60 s).
	assert.Equal(t, "2025-06-01T11:59:30.000Z", sums["gpu.utilization"].Timestamp)
	assert.Equal(t, int32(60), sums["build.jobs/success"].StorageResolution)

	hists := readGolden(t, "histograms.json")
	// build.stage.duration: 5 observations, sum 70, min 2, max 40, in
	// (1,10] x3 and (10,60] x2. Min and max go as values of their own
	// (count 1 each), the buckets clamped to (2,10] x2 and (10,40] x1 hold
	// the remaining 70-2-40 = 28. From the midpoints 6 and 25 (weighted sum
	// 37) every value moves the same fraction f of its room toward its lower
	// bound: 2(6-2) + (25-10) = 23 of room for 9, f = 9/23, so 6-4f = 102/23
	// and 25-15f = 440/23. CloudWatch computes from Values x Counts:
	// SampleCount 1+2+1+1 = 5, Sum 2 + 2*102/23 + 440/23 + 40 = 70,
	// Minimum 2, Maximum 40: the histogram's own statistics.
	stage := hists["build.stage.duration/index"]
	require.Len(t, stage.Values, 4)
	assert.Equal(t, 2.0, stage.Values[0])
	assert.InDelta(t, 102.0/23, stage.Values[1], 1e-12)
	assert.InDelta(t, 440.0/23, stage.Values[2], 1e-12)
	assert.Equal(t, 40.0, stage.Values[3])
	assert.Equal(t, []float64{1, 2, 1, 1}, stage.Counts)
	assert.Equal(t, "Seconds", stage.Unit)
	var n, sum float64
	for i, v := range stage.Values {
		n += stage.Counts[i]
		sum += v * stage.Counts[i]
	}
	assert.Equal(t, 5.0, n)
	assert.InDelta(t, 70.0, sum, 1e-9)
	// A histogram without bucket bounds says only its statistics: a
	// StatisticSet, in Milliseconds for ms.
	assert.Equal(t, &DryRunStatistics{SampleCount: 4, Sum: 100, Minimum: 10, Maximum: 40}, hists["api.request.duration"].StatisticValues)
	assert.Equal(t, "Milliseconds", hists["api.request.duration"].Unit)
	// Exponential, scale 0: bucket i is (2^i, 2^(i+1)], so one observation
	// in (1,2] and one in (2,4]; they are the min 1.5 and max 3 (sum 4.5).
	size := hists["build.vectors.size"]
	assert.Equal(t, []float64{1.5, 3}, size.Values)
	assert.Equal(t, []float64{1, 1}, size.Counts)
	assert.Equal(t, "Kilobytes", size.Unit)
}
