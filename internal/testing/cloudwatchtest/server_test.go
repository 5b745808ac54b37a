// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchtest

import (
	"context"
	"errors"
	"math"
	"net/http"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func startServer(t *testing.T) (*Server, *cloudwatch.Client) {
	t.Helper()
	s, err := Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	client := cloudwatch.New(cloudwatch.Options{
		Region:       "eu-west-1",
		BaseEndpoint: aws.String(s.Endpoint()),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		Retryer:      aws.NopRetryer{},
	})
	return s, client
}

func put(client *cloudwatch.Client, datums ...types.MetricDatum) error {
	_, err := client.PutMetricData(context.Background(), &cloudwatch.PutMetricDataInput{
		Namespace:  aws.String("Test/NS"),
		MetricData: datums,
	})
	return err
}

func valueDatum(name string, v float64) types.MetricDatum {
	return types.MetricDatum{MetricName: aws.String(name), Value: aws.Float64(v), Timestamp: aws.Time(time.Now())}
}

func errorCode(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}

func TestAcceptsEveryDatumShape(t *testing.T) {
	s, client := startServer(t)
	now := time.Now().Truncate(time.Millisecond)
	err := put(client,
		types.MetricDatum{
			MetricName: aws.String("gpu.utilization"), Value: aws.Float64(0.75), Timestamp: aws.Time(now),
			Unit: types.StandardUnitPercent, StorageResolution: aws.Int32(1),
			Dimensions: []types.Dimension{{Name: aws.String("gpu.uuid"), Value: aws.String("GPU-1")}},
		},
		types.MetricDatum{
			MetricName: aws.String("latency"), Timestamp: aws.Time(now), Unit: types.StandardUnitMilliseconds,
			StatisticValues: &types.StatisticSet{SampleCount: aws.Float64(4), Sum: aws.Float64(10), Minimum: aws.Float64(1), Maximum: aws.Float64(4)},
		},
		types.MetricDatum{
			MetricName: aws.String("latency"), Timestamp: aws.Time(now),
			Values: []float64{1, 2.5, 4}, Counts: []float64{1, 2, 1},
		},
		types.MetricDatum{MetricName: aws.String("no-counts"), Timestamp: aws.Time(now), Values: []float64{7, 8}},
	)
	require.NoError(t, err)

	got := s.Datums()
	require.Len(t, got, 4)
	assert.Equal(t, Datum{
		Namespace: "Test/NS", MetricName: "gpu.utilization", Unit: "Percent",
		Dimensions: map[string]string{"gpu.uuid": "GPU-1"}, Timestamp: now.UTC(),
		Value: aws.Float64(0.75), StorageResolution: 1,
	}, got[0])
	assert.Equal(t, &StatisticSet{SampleCount: 4, Sum: 10, Minimum: 1, Maximum: 4}, got[1].Statistics)
	assert.Equal(t, int32(60), got[1].StorageResolution, "60 unless given")
	assert.Equal(t, []float64{1, 2.5, 4}, got[2].Values)
	assert.Equal(t, []float64{1, 2, 1}, got[2].Counts)
	assert.Equal(t, []float64{1, 1}, got[3].Counts, "omitted counts are 1")

	assert.Equal(t, Stats{Requests: 1, Accepted: 1}, s.Stats())
	reqs := s.Requests()
	require.Len(t, reqs, 1)
	assert.True(t, reqs[0].Compressed, "the SDK gzips PutMetricData bodies")
	assert.Equal(t, 4, reqs[0].Datums)
	assert.Positive(t, reqs[0].BodyBytes)

	s.Reset()
	assert.Empty(t, s.Datums())
	assert.Equal(t, Stats{}, s.Stats())
}

func TestRejectsWhatCloudWatchRejects(t *testing.T) {
	now := time.Now()
	long := func(n int) *string { return aws.String(strings.Repeat("x", n)) }
	dims := func(n int) []types.Dimension {
		var d []types.Dimension
		for i := 0; i < n; i++ {
			d = append(d, types.Dimension{Name: aws.String(strings.Repeat("d", i+1)), Value: aws.String("v")})
		}
		return d
	}
	withDims := func(d ...types.Dimension) types.MetricDatum {
		m := valueDatum("m", 1)
		m.Dimensions = d
		return m
	}
	dim := func(name, value *string) types.Dimension { return types.Dimension{Name: name, Value: value} }
	manyValues := make([]float64, 151)
	for i := range manyValues {
		manyValues[i] = float64(i)
	}
	tooMany := make([]types.MetricDatum, 1001)
	for i := range tooMany {
		tooMany[i] = valueDatum("m", 1)
	}
	// About 1.2 MB: 40 datums with 30 dimensions of 1000 characters.
	huge := make([]types.MetricDatum, 40)
	for i := range huge {
		huge[i] = valueDatum("m", 1)
		for j := 0; j < 30; j++ {
			huge[i].Dimensions = append(huge[i].Dimensions, dim(aws.String(strings.Repeat("n", j+1)), aws.String(strings.Repeat(string(rune('a'+j%26)), 1000))))
		}
	}

	tests := []struct {
		name   string
		datums []types.MetricDatum
		code   string
	}{
		{"more than 1000 datums", tooMany, "InvalidParameterValue"},
		{"body over 1 MB", huge, "RequestEntityTooLarge"},
		{"more than 150 values", []types.MetricDatum{{MetricName: aws.String("m"), Values: manyValues}}, "InvalidParameterValue"},
		{"counts not as long as values", []types.MetricDatum{{MetricName: aws.String("m"), Values: []float64{1, 2}, Counts: []float64{1}}}, "InvalidParameterValue"},
		{"repeated value", []types.MetricDatum{{MetricName: aws.String("m"), Values: []float64{1, 1}}}, "InvalidParameterValue"},
		{"negative count", []types.MetricDatum{{MetricName: aws.String("m"), Values: []float64{1}, Counts: []float64{-1}}}, "InvalidParameterValue"},
		{"31 dimensions", []types.MetricDatum{withDims(dims(31)...)}, "InvalidParameterValue"},
		{"dimension name over 255", []types.MetricDatum{withDims(dim(long(256), aws.String("v")))}, "InvalidParameterValue"},
		{"dimension value over 1024", []types.MetricDatum{withDims(dim(aws.String("n"), long(1025)))}, "InvalidParameterValue"},
		{"empty dimension value", []types.MetricDatum{withDims(dim(aws.String("n"), aws.String("")))}, "InvalidParameterValue"},
		{"blank dimension value", []types.MetricDatum{withDims(dim(aws.String("n"), aws.String("  ")))}, "InvalidParameterValue"},
		{"non-ASCII dimension value", []types.MetricDatum{withDims(dim(aws.String("n"), aws.String("größe")))}, "InvalidParameterValue"},
		{"dimension name starting with a colon", []types.MetricDatum{withDims(dim(aws.String(":n"), aws.String("v")))}, "InvalidParameterValue"},
		{"repeated dimension", []types.MetricDatum{withDims(dim(aws.String("n"), aws.String("a")), dim(aws.String("n"), aws.String("b")))}, "InvalidParameterValue"},
		{"metric name over 255", []types.MetricDatum{valueDatum(strings.Repeat("m", 256), 1)}, "InvalidParameterValue"},
		{"value and statistics", []types.MetricDatum{{MetricName: aws.String("m"), Value: aws.Float64(1),
			StatisticValues: &types.StatisticSet{SampleCount: aws.Float64(1), Sum: aws.Float64(1), Minimum: aws.Float64(1), Maximum: aws.Float64(1)}}}, "InvalidParameterCombination"},
		{"value and values", []types.MetricDatum{{MetricName: aws.String("m"), Value: aws.Float64(1), Values: []float64{1}}}, "InvalidParameterCombination"},
		{"no value at all", []types.MetricDatum{{MetricName: aws.String("m")}}, "MissingParameter"},
		{"minimum above maximum", []types.MetricDatum{{MetricName: aws.String("m"),
			StatisticValues: &types.StatisticSet{SampleCount: aws.Float64(2), Sum: aws.Float64(1), Minimum: aws.Float64(2), Maximum: aws.Float64(1)}}}, "InvalidParameterValue"},
		{"NaN", []types.MetricDatum{valueDatum("m", math.NaN())}, "InvalidParameterValue"},
		{"+Inf", []types.MetricDatum{valueDatum("m", math.Inf(1))}, "InvalidParameterValue"},
		{"above 2^360", []types.MetricDatum{valueDatum("m", 1e200)}, "InvalidParameterValue"},
		{"below 2^-360", []types.MetricDatum{valueDatum("m", 1e-200)}, "InvalidParameterValue"},
		{"NaN in values", []types.MetricDatum{{MetricName: aws.String("m"), Values: []float64{1, math.NaN()}}}, "InvalidParameterValue"},
		{"older than two weeks", []types.MetricDatum{{MetricName: aws.String("m"), Value: aws.Float64(1), Timestamp: aws.Time(now.Add(-15 * 24 * time.Hour))}}, "InvalidParameterValue"},
		{"more than two hours ahead", []types.MetricDatum{{MetricName: aws.String("m"), Value: aws.Float64(1), Timestamp: aws.Time(now.Add(3 * time.Hour))}}, "InvalidParameterValue"},
		{"storage resolution 30", []types.MetricDatum{{MetricName: aws.String("m"), Value: aws.Float64(1), StorageResolution: aws.Int32(30)}}, "InvalidParameterValue"},
		{"unknown unit", []types.MetricDatum{{MetricName: aws.String("m"), Value: aws.Float64(1), Unit: "Nanoseconds"}}, "InvalidParameterValue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, client := startServer(t)
			// One good datum first: one bad datum rejects the whole request.
			err := put(client, append([]types.MetricDatum{valueDatum("good", 1)}, tt.datums...)...)
			require.Error(t, err)
			assert.Equal(t, tt.code, errorCode(err), err.Error())
			var respErr *smithyhttp.ResponseError
			require.ErrorAs(t, err, &respErr)
			if tt.code == "RequestEntityTooLarge" {
				assert.Equal(t, http.StatusRequestEntityTooLarge, respErr.HTTPStatusCode())
			} else {
				assert.Equal(t, http.StatusBadRequest, respErr.HTTPStatusCode())
				// The SDK sees a client fault, which it never retries.
				var apiErr smithy.APIError
				require.ErrorAs(t, err, &apiErr)
				assert.Equal(t, smithy.FaultClient, apiErr.ErrorFault())
			}
			assert.Empty(t, s.Datums())
			assert.Equal(t, Stats{Requests: 1, Rejected: 1}, s.Stats())
		})
	}
}

func TestRejectsReservedNamespace(t *testing.T) {
	_, client := startServer(t)
	_, err := client.PutMetricData(context.Background(), &cloudwatch.PutMetricDataInput{
		Namespace: aws.String("AWS/EC2"), MetricData: []types.MetricDatum{valueDatum("m", 1)},
	})
	assert.Equal(t, "InvalidParameterValue", errorCode(err))
}

func TestFaultsAsTheSDKSeesThem(t *testing.T) {
	throttles := retry.IsErrorThrottles(retry.DefaultThrottles)
	retryables := retry.IsErrorRetryables(retry.DefaultRetryables)

	t.Run("throttling", func(t *testing.T) {
		s, client := startServer(t)
		s.SetFaults(Faults{ThrottleEvery: 2})
		require.NoError(t, put(client, valueDatum("m", 1)))
		err := put(client, valueDatum("m", 2))
		require.Error(t, err)
		assert.Equal(t, "Throttling", errorCode(err))
		assert.Equal(t, aws.TrueTernary, throttles.IsErrorThrottle(err), "the SDK classifies it as throttling")
		require.NoError(t, put(client, valueDatum("m", 3)))
		assert.Equal(t, Stats{Requests: 3, Accepted: 2, Throttled: 1}, s.Stats())
		assert.Len(t, s.Datums(), 2)
	})
	t.Run("server error", func(t *testing.T) {
		s, client := startServer(t)
		s.SetFaults(Faults{ServerErrorEvery: 1})
		err := put(client, valueDatum("m", 1))
		var respErr *smithyhttp.ResponseError
		require.ErrorAs(t, err, &respErr)
		assert.Equal(t, http.StatusServiceUnavailable, respErr.HTTPStatusCode())
		assert.Equal(t, aws.TrueTernary, retryables.IsErrorRetryable(err), "the SDK would retry a 503")
		s.SetFaults(Faults{})
		require.NoError(t, put(client, valueDatum("m", 1)))
		assert.Equal(t, Stats{Requests: 2, Accepted: 1, ServerErrors: 1}, s.Stats())
	})
	t.Run("dropped connection", func(t *testing.T) {
		s, client := startServer(t)
		s.SetFaults(Faults{DropEvery: 1})
		err := put(client, valueDatum("m", 1))
		require.Error(t, err)
		var respErr *smithyhttp.ResponseError
		require.ErrorAs(t, err, &respErr)
		assert.Zero(t, respErr.HTTPStatusCode(), "no HTTP answer at all: %v", err)
		assert.Equal(t, aws.TrueTernary, retryables.IsErrorRetryable(err), "the SDK would retry a broken connection: %v", err)
		assert.Equal(t, Stats{Requests: 1, Dropped: 1}, s.Stats())
		assert.Empty(t, s.Datums())
	})
	t.Run("latency", func(t *testing.T) {
		s, client := startServer(t)
		s.SetFaults(Faults{Latency: 500 * time.Millisecond})
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := client.PutMetricData(ctx, &cloudwatch.PutMetricDataInput{
			Namespace: aws.String("Test/NS"), MetricData: []types.MetricDatum{valueDatum("m", 1)},
		})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Empty(t, s.Datums(), "the answer never came, and nothing was recorded before it")
	})
}

func TestOutageKeepsThePort(t *testing.T) {
	s, client := startServer(t)
	require.NoError(t, put(client, valueDatum("m", 1)))
	require.NoError(t, s.SetDown(true))
	// The first request may still try the kept-alive connection (broken
	// pipe); after that, new connections are refused.
	require.Error(t, put(client, valueDatum("m", 2)))
	err := put(client, valueDatum("m", 2))
	assert.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.NoError(t, s.SetDown(false))
	require.NoError(t, put(client, valueDatum("m", 3)))
	var values []float64
	for _, d := range s.Datums() {
		values = append(values, *d.Value)
	}
	assert.Equal(t, []float64{1, 3}, values)
}

// An outage right after Start (or right after the last one ended) must free
// the port at once, before the server's goroutine has run: on a busy
// machine that goroutine can start after SetDown(false) listens again.
func TestOutageRightAfterStartFreesThePort(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for range 50 {
		s, err := Start("127.0.0.1:0")
		require.NoError(t, err)
		for range 3 {
			require.NoError(t, s.SetDown(true))
			require.NoError(t, s.SetDown(false))
		}
		require.NoError(t, s.Close())
	}
}

func TestClockAndOnAccept(t *testing.T) {
	s, client := startServer(t)
	past := time.Now().Add(-30 * 24 * time.Hour)
	s.SetClock(func() time.Time { return past })
	var seen []Datum
	s.OnAccept(func(d []Datum) { seen = append(seen, d...) })
	// Relative to the server's clock, a month-old timestamp is current.
	require.NoError(t, put(client, types.MetricDatum{MetricName: aws.String("m"), Value: aws.Float64(1), Timestamp: aws.Time(past)}))
	require.Len(t, seen, 1)
	assert.Equal(t, "m", seen[0].MetricName)
}
