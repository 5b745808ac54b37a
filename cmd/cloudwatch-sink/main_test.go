// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// lockedBuffer is written by the server's handler and read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestSinkPrintsAcceptedDatums(t *testing.T) {
	var out, log lockedBuffer
	server, err := serve("127.0.0.1:0", &out, &log, nil)
	require.NoError(t, err)
	defer server.Close()
	assert.Contains(t, log.String(), server.Endpoint())

	client := cloudwatch.New(cloudwatch.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(server.Endpoint()),
		Credentials:  credentials.NewStaticCredentialsProvider("demo", "demo", ""),
		Retryer:      aws.NopRetryer{},
	})
	_, err = client.PutMetricData(context.Background(), &cloudwatch.PutMetricDataInput{
		Namespace: aws.String("GPUBuild/Demo"),
		MetricData: []types.MetricDatum{
			{MetricName: aws.String("gpu.utilization"), Value: aws.Float64(0.5), Timestamp: aws.Time(time.Now()),
				Dimensions: []types.Dimension{{Name: aws.String("gpu.uuid"), Value: aws.String("GPU-0")}}},
			{MetricName: aws.String("stage.duration"), Values: []float64{1, 2}, Counts: []float64{3, 4}},
		},
	})
	require.NoError(t, err)

	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 2)
	var first cloudwatchtest.Datum
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &first))
	assert.Equal(t, "GPUBuild/Demo", first.Namespace)
	assert.Equal(t, "gpu.utilization", first.MetricName)
	assert.Equal(t, map[string]string{"gpu.uuid": "GPU-0"}, first.Dimensions)
	assert.Equal(t, 0.5, *first.Value)
	assert.Contains(t, lines[1], `"Values":[1,2],"Counts":[3,4]`)

	// A rejected request is reported on the log, not printed.
	_, err = client.PutMetricData(context.Background(), &cloudwatch.PutMetricDataInput{
		Namespace:  aws.String("GPUBuild/Demo"),
		MetricData: []types.MetricDatum{{MetricName: aws.String("m"), Value: aws.Float64(1), StorageResolution: aws.Int32(5)}},
	})
	require.Error(t, err)
	assert.Contains(t, log.String(), "InvalidParameterValue")
	assert.Len(t, strings.Split(strings.TrimSpace(out.String()), "\n"), 2)
}

func TestSummaryTotals(t *testing.T) {
	v := 2.5
	s := newSummary()
	s.add(cloudwatchtest.Datum{MetricName: "build.jobs", Unit: "Count", Value: &v,
		Dimensions: map[string]string{"build.result": "success", "service.name": "svc"}})
	s.add(cloudwatchtest.Datum{MetricName: "build.jobs", Unit: "Count", Value: &v,
		Dimensions: map[string]string{"build.result": "success", "service.name": "other"}})
	s.add(cloudwatchtest.Datum{MetricName: "build.job.duration", Unit: "Seconds",
		Values: []float64{1, 10}, Counts: []float64{3, 2}})
	s.add(cloudwatchtest.Datum{MetricName: "api.request.duration", Unit: "Seconds",
		Statistics: &cloudwatchtest.StatisticSet{SampleCount: 4, Sum: 0.8, Minimum: 0.1, Maximum: 0.3}})

	var out bytes.Buffer
	s.print(&out)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 4, out.String())
	assert.Equal(t, []string{"api.request.duration", "Seconds", "1", "4", "0.8"}, strings.Fields(lines[1]))
	assert.Equal(t, []string{"build.job.duration", "Seconds", "1", "5", "23"}, strings.Fields(lines[2]), "3x1 + 2x10")
	assert.Equal(t, []string{"build.jobs", "build.result=success", "Count", "2", "2", "5"}, strings.Fields(lines[3]), "service.name is not a breakdown dimension")
}
