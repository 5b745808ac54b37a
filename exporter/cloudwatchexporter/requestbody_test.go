// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"math"
	"net/http"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/send"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// recording answers every request with an empty success and keeps the last
// request's body (decompressed) and headers.
type recording struct {
	body   []byte
	header http.Header
	path   string
}

func (r *recording) Do(req *http.Request) (*http.Response, error) {
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			return nil, err
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	r.body, r.header, r.path = b, req.Header.Clone(), req.URL.Path
	return &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": {"application/cbor"}, "Smithy-Protocol": {"rpc-v2-cbor"}},
		Body:       io.NopCloser(bytes.NewReader([]byte{0xa0})),
		Request:    req,
	}, nil
}

func recordingClient(rec *recording) *cloudwatch.Client {
	return cloudwatch.New(cloudwatch.Options{
		Region:       "eu-west-1",
		BaseEndpoint: aws.String("http://cloudwatch.invalid"),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		Retryer:      aws.NopRetryer{},
		HTTPClient:   rec,
	})
}

// sdkRequest is what the SDK itself sends for datums.
func sdkRequest(t testing.TB, namespace string, datums []translate.Datum) *recording {
	t.Helper()
	rec := &recording{}
	_, err := recordingClient(rec).PutMetricData(context.Background(), translate.ToInput(namespace, datums))
	require.NoError(t, err)
	return rec
}

// ourRequest is what the exporter's putter sends for datums.
func ourRequest(t testing.TB, namespace string, datums []translate.Datum) *recording {
	t.Helper()
	rec := &recording{}
	require.NoError(t, send.NewPutter(recordingClient(rec)).Put(context.Background(), namespace, datums))
	return rec
}

func sampleDatums() []translate.Datum {
	ts := pcommon.NewTimestampFromTime(time.Date(2026, 11, 24, 12, 30, 15, 123456789, time.UTC))
	long := string(bytes.Repeat([]byte("x"), 300))
	return []translate.Datum{
		{Name: "build.jobs", Unit: translate.UnitIDOf(types.StandardUnitCount), Timestamp: ts, Kind: translate.KindValue, Value: 3, Resolution: 60,
			Dims: []translate.Dimension{{Name: "build.result", Value: "success"}, {Name: "service.name", Value: "vector-builder"}}},
		{Name: "gpu.utilization", Timestamp: ts, Kind: translate.KindValue, Value: 0.375, Resolution: 1},
		{Name: "build.duration", Unit: translate.UnitIDOf(types.StandardUnitSeconds), Timestamp: ts, Kind: translate.KindStatistics, Resolution: 60,
			Floats: []float64{12, 345.5, 1.25, 99}}, // sampleCount, sum, min, max
		{Name: "api.latency", Unit: translate.UnitIDOf(types.StandardUnitMilliseconds), Timestamp: ts, Kind: translate.KindValues, Resolution: 60,
			Floats: []float64{1, 2.5, 1e300, math.Copysign(0, -1), 1, 70000, 3, 1}}, // values, counts
		{Name: "größe/日本 " + long, Timestamp: ts, Kind: translate.KindValue, Value: math.SmallestNonzeroFloat64, Resolution: 60,
			Dims: []translate.Dimension{{Name: long, Value: "ü"}}},
	}
}

// Requests in flight hold only their compressed bodies: the uncompressed
// CBOR buffer and the gzip writer (about 800 KiB) are one each, reused by
// every body, where a CBOR buffer per request would hold ten times the
// bytes sent and a writer per processor (what a sync.Pool keeps) dozens of
// writers on a GPU host. Sixteen bodies prepared at once on sixteen
// processors, after a first body made the writer, allocate little more
// than their compressed bytes, and each decompresses to its own request.
func TestBodiesInFlightHoldOnlyTheirCompressedBytes(t *testing.T) {
	var tr translate.Translation
	translate.NewTranslator(translatorConfig(testConfig())).Translate(convertedBatch(64), time.Now(), &tr)
	const bodies, ns = 16, "GPUBuild/Test"
	datums := func(i int) []translate.Datum { return tr.Datums[i*100 : i*100+100] }
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(bodies))
	defer debug.SetGCPercent(debug.SetGCPercent(-1))

	w := send.NewBodyWriter(send.ScratchKeep)
	first, err := w.Prepare(ns, datums(0))
	require.NoError(t, err)
	require.True(t, first.Body.Gzipped)
	w.Release(first)

	var before, after runtime.MemStats
	prepared := make([]*send.BodyBuffers, bodies)
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	for i := range bodies {
		wg.Go(func() {
			b, err := w.Prepare(ns, datums(i))
			if assert.NoError(t, err) {
				prepared[i] = b
			}
		})
	}
	wg.Wait()
	runtime.ReadMemStats(&after)

	compressed, raw := 0, 0
	for i, b := range prepared {
		require.NotNil(t, b)
		require.True(t, b.Body.Gzipped)
		compressed += len(b.Body.Bytes)
		want := translate.AppendPutMetricData(nil, ns, datums(i))
		raw += len(want)
		zr, err := gzip.NewReader(bytes.NewReader(b.Body.Bytes))
		require.NoError(t, err)
		got, err := io.ReadAll(zr)
		require.NoError(t, err)
		assert.Equal(t, want, got, "body %d", i)
	}
	require.Greater(t, raw, 4*compressed, "the CBOR compresses well here: what a buffer per body would hold")
	// Each body's buffer grows by doubling to at most twice its bytes; the
	// shared CBOR buffer may grow once more for a larger body.
	allocated := after.TotalAlloc - before.TotalAlloc
	assert.Less(t, allocated, uint64(2*compressed+2*raw/bodies+bodies*1024),
		"%d bodies at once allocated %d bytes; compressed %d, uncompressed %d", bodies, allocated, compressed, raw)
	for _, b := range prepared {
		w.Release(b)
	}
}

// The uncompressed buffer and the gzip writer are reused while bodies keep
// coming, and let go once none came for the keep time: a sidecar quiet
// between bursts does not hold them.
func TestBodyScratchDroppedOnceUnused(t *testing.T) {
	var tr translate.Translation
	translate.NewTranslator(translatorConfig(testConfig())).Translate(convertedBatch(64), time.Now(), &tr)
	const keep = 500 * time.Millisecond
	w := send.NewBodyWriter(keep)
	scratch := func() (*gzip.Writer, []byte) {
		w.Mu.Lock()
		defer w.Mu.Unlock()
		return w.Gzip, w.Raw
	}
	prepare := func() {
		b, err := w.Prepare("GPUBuild/Test", tr.Datums[:100])
		require.NoError(t, err)
		require.True(t, b.Body.Gzipped)
		w.Release(b)
	}

	prepare()
	first, raw := scratch()
	require.NotNil(t, first)
	require.NotNil(t, raw)
	// Bodies far closer together than keep (the pace is the test's input).
	for range 5 {
		time.Sleep(keep / 25)
		prepare()
		gz, _ := scratch()
		require.Same(t, first, gz, "the writer is reused while bodies keep coming")
	}

	require.Eventually(t, func() bool {
		gz, raw := scratch()
		return gz == nil && raw == nil
	}, 10*time.Second, 10*time.Millisecond, "the scratch is kept although no body came")
	prepare() // and made again for the next body
	gz, _ := scratch()
	require.NotNil(t, gz)
	require.NotSame(t, first, gz)
}
