#!/usr/bin/env bash
# Cost of the pipeline-health series (docs/operations.md): the default
# CloudWatch-only sidecar under cmd/buildsim load, once with
# GPUBUILD_PIPELINE_TELEMETRY_ENABLED=true (the default) and once false,
# sending to cmd/cloudwatch-sink. Prints, per run: the distinct otelcol_*
# metric + dimension sets that landed (CloudWatch bills each per month),
# their datums per interval, PutMetricData requests and datums sent in
# all (the sidecar's own counters, from its pull endpoint), and the CPU
# seconds the sidecar used.
#   scripts/bench-pipeline-health.sh [SECONDS] [INTERVAL]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-180}; interval=${2:-60s}
make -s build >/dev/null
work=$(mktemp -d); trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
go build -o "$work/sink" ./cmd/cloudwatch-sink
go build -o "$work/buildsim" ./cmd/buildsim

run() { # $1: true|false
  local dir="$work/$1"; mkdir -p "$dir"
  "$work/sink" -listen 127.0.0.1:24566 >"$dir/datums.jsonl" 2>"$dir/sink.log" & local sink=$!
  env -i PATH="$PATH" HOME="$HOME" AWS_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true \
    AWS_ACCESS_KEY_ID=AKIDBENCH AWS_SECRET_ACCESS_KEY=bench AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null \
    GPUBUILD_CLOUDWATCH_OUTPUT=cloudwatch GPUBUILD_CLOUDWATCH_ENDPOINT=http://127.0.0.1:24566 \
    GPUBUILD_QUEUE_DIR="$dir/queue" GPUBUILD_OTLP_GRPC_PORT=24317 GPUBUILD_OTLP_HTTP_PORT=24318 \
    GPUBUILD_HEALTH_PORT=23133 GPUBUILD_TELEMETRY_PORT=28888 \
    GPUBUILD_PIPELINE_TELEMETRY_ENABLED="$1" GPUBUILD_PIPELINE_TELEMETRY_INTERVAL="$interval" \
    bin/otelcol-gpubuild --config otelcol-config.yaml >"$dir/collector.log" 2>&1 & local col=$!
  until curl -sf http://127.0.0.1:23133/ >/dev/null; do sleep 0.2; done
  local t0; t0=$(awk '{print $14+$15}' /proc/$col/stat)
  # About 2 builds a second, each with its API calls and SDK metrics, for $secs.
  timeout "$((secs + 30))" "$work/buildsim" -protocol http -endpoint 127.0.0.1:24318 \
    -jobs "$((secs * 2))" -rate 2 >/dev/null 2>"$dir/buildsim.log" || true
  local t1; t1=$(awk '{print $14+$15}' /proc/$col/stat)
  local tel; tel=$(curl -s http://127.0.0.1:28888/metrics)
  kill -TERM $col; wait $col || true
  kill -TERM $sink; wait $sink || true
  local hz; hz=$(getconf CLK_TCK)
  python3 - "$dir/datums.jsonl" "$1" "$(( (t1 - t0) ))" "$hz" "$secs" "$interval" <<'PY' 
import json, sys, collections
path, mode, ticks, hz, secs, interval = sys.argv[1:]
sets, datums = set(), 0
for line in open(path):
    if not line.startswith("{"):
        continue  # the sink's summary at exit
    d = json.loads(line)
    if d["MetricName"].startswith("otelcol_"):
        sets.add((d["MetricName"], tuple(sorted(d.get("Dimensions", {}).items()))))
        datums += 1
iv = float(interval.rstrip("s"))
print(f"pipeline telemetry {mode}: {len(sets)} otelcol_ metric+dimension sets, "
      f"{datums} otelcol_ datums in {secs} s ({datums * iv / float(secs):.1f} per {interval}), "
      f"CPU {int(ticks) / int(hz):.2f} s over the load")
for name, dims in sorted(sets):
    print("   ", name, dict(dims))
PY
  echo "$tel" | grep -E '^otelcol_exporter_cloudwatch_(requests|datums_sent)' | sed 's/^/    /'
}
run true
run false
