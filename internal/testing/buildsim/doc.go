// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package buildsim simulates the GPU vector-index build service's telemetry
// with the OpenTelemetry Go SDK and keeps an exact ground truth of what it
// emitted and what the receiving collector acknowledged.
//
// It emits what docs/build-service-contract.md describes: a job span per build
// run with one child span per stage (download, gpu_build, gpu_to_cpu, upload),
// job status log records (RUNNING_INDEX_BUILD, then COMPLETED_INDEX_BUILD or
// FAILED_INDEX_BUILD), HTTP SERVER spans for POST /_build and
// GET /_status/{job_id} with a 2xx/4xx/5xx mix, and SDK metrics (a cumulative
// counter, a histogram and an asynchronous GPU-utilization gauge).
//
// Time is simulated: spans and log records carry explicit timestamps, so a run
// of a thousand hour-long builds takes seconds. Every duration is a whole
// multiple of [DurationQuantum] (1/512 s), which float64 represents exactly,
// so sums of durations compare exactly whatever order a consumer adds them in.
//
// The plan of a run (jobs, stages, results, durations, API requests) depends
// only on the seed and the configuration, never on timing.
package buildsim
