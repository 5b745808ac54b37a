#!/usr/bin/env bash
# make demo: the simulated build service -> otelcol-gpubuild (default config)
# -> a local, protocol-faithful CloudWatch endpoint. Prints buildsim's ground
# truth and the totals that landed, so the two can be compared.
set -euo pipefail
cd "$(dirname "$0")/.."
work=.run/demo
rm -rf "$work"; mkdir -p "$work/queue"
go build -o bin/cloudwatch-sink ./cmd/cloudwatch-sink
go build -o bin/buildsim ./cmd/buildsim

pids=()
cleanup() { for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

bin/cloudwatch-sink -quiet -listen 127.0.0.1:4566 >"$work/landed.txt" 2>"$work/sink.log" &
sink=$!; pids+=("$sink")

env -u AWS_PROFILE \
  AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=demo AWS_SECRET_ACCESS_KEY=demo \
  GPUBUILD_CLOUDWATCH_OUTPUT=cloudwatch GPUBUILD_CLOUDWATCH_ENDPOINT=http://127.0.0.1:4566 \
  GPUBUILD_CLOUDWATCH_NAMESPACE=GPUIndexBuild/Demo GPUBUILD_FLUSH_INTERVAL=2s \
  GPUBUILD_QUEUE_DIR="$PWD/$work/queue" \
  bin/otelcol-gpubuild --config otelcol-config.yaml >"$work/collector.log" 2>&1 &
collector=$!; pids+=("$collector")

for _ in $(seq 100); do bin/healthprobe >/dev/null 2>&1 && break; sleep 0.2; done
bin/healthprobe

echo "buildsim: 40 simulated builds (download, gpu_build, gpu_to_cpu, upload) over OTLP/gRPC..."
bin/buildsim -jobs 40 -rate 20 -endpoint 127.0.0.1:4317 -protocol grpc -metric-interval 1s >"$work/truth.json"
sleep 3 # one flush interval of the buildjob connector

kill -TERM "$collector"; wait "$collector" || true   # SIGTERM flushes the queue
kill -TERM "$sink"; wait "$sink" || true

echo; echo "== ground truth printed by buildsim ($work/truth.json)"; cat "$work/truth.json"
echo; echo "== what landed in the local CloudWatch endpoint ($work/landed.txt)"; cat "$work/landed.txt"
echo; echo "collector log: $work/collector.log"
