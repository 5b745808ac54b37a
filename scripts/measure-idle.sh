#!/usr/bin/env bash
# Idle footprint of the default sidecar against a stock cgo-enabled ocb build
# of the same Collector version running otlp -> debug, measured in one run
# (alternating, ROUNDS times) so the ratio survives a noisy shared machine.
# RSS is split into anonymous memory (heap, stacks: what a memory limit
# really has to hold) and file-backed pages of the binary (shared, clean,
# reclaimable page cache). Each binary's cached pages are dropped before it
# starts, so how the file got into the cache (just built, copied) does not
# change the figure.
#   scripts/measure-idle.sh [ROUNDS] [IDLE_SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}; idle=${2:-20}
make -s build >/dev/null

work=test/load/.build/idle-baseline
mkdir -p "$work"
sed -e "s#output_path: .*#output_path: ./$work#" \
    -e "s#^  version: 0.161.0#  version: 0.161.0\n  cgo_enabled: true#" \
    test/load/baseline-builder-config.yaml > "$work/builder.yaml"
[ -x "$work/otelcol-baseline" ] || .tools/bin/builder --config "$work/builder.yaml" --ldflags='-s -w' >/dev/null 2>"$work/build.log"

cat > "$work/config.yaml" <<'YAML'
receivers:
  otlp:
    protocols:
      grpc: {endpoint: 127.0.0.1:14317}
      http: {endpoint: 127.0.0.1:14318}
exporters:
  debug: {verbosity: basic}
service:
  pipelines:
    traces: {receivers: [otlp], exporters: [debug]}
    logs: {receivers: [otlp], exporters: [debug]}
    metrics: {receivers: [otlp], exporters: [debug]}
  telemetry:
    metrics: {level: none}
YAML

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
uncache() { python3 -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$1"; }
sample() { # name cmd... -> "rss_kib hwm_kib anon_kib file_kib"
  local name=$1; shift
  uncache "$1"
  "$@" >"$tmp/$name.log" 2>&1 & local pid=$!
  sleep "$idle" # idle is a duration, not a condition
  local st; st=$(cat /proc/$pid/status)
  kill -TERM $pid; wait $pid || true
  awk '/^VmRSS/{r=$2} /^VmHWM/{h=$2} /^RssAnon/{a=$2} /^RssFile/{f=$2} END{print r, h, a, f}' <<<"$st"
}

declare -a ours base
for r in $(seq "$rounds"); do
  ours+=("$(unset AWS_REGION; export GPUBUILD_QUEUE_DIR="$tmp/q$r" AWS_EC2_METADATA_DISABLED=true
      sample ours ./bin/otelcol-gpubuild --config otelcol-config.yaml)")
  base+=("$(sample base "$work/otelcol-baseline" --config "$work/config.yaml")")
done

median() { sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
o_rss=$(printf '%s\n' "${ours[@]}" | awk '{print $1}' | median)
o_hwm=$(printf '%s\n' "${ours[@]}" | awk '{print $2}' | median)
b_rss=$(printf '%s\n' "${base[@]}" | awk '{print $1}' | median)
b_hwm=$(printf '%s\n' "${base[@]}" | awk '{print $2}' | median)
o_anon=$(printf '%s\n' "${ours[@]}" | awk '{print $3}' | median)
o_file=$(printf '%s\n' "${ours[@]}" | awk '{print $4}' | median)
b_anon=$(printf '%s\n' "${base[@]}" | awk '{print $3}' | median)
b_file=$(printf '%s\n' "${base[@]}" | awk '{print $4}' | median)
o_size=$(stat -c %s bin/otelcol-gpubuild); b_size=$(stat -c %s "$work/otelcol-baseline")

echo "| after ${idle}s idle, median of $rounds | otelcol-gpubuild (default config, dry run) | stock otlp->debug (cgo) | ratio |"
echo "|---|---|---|---|"
awk -v a="$o_rss" -v b="$b_rss" 'BEGIN{printf "| RSS | %.1f MiB | %.1f MiB | %.2f |\n", a/1024, b/1024, a/b}'
awk -v a="$o_anon" -v b="$b_anon" 'BEGIN{printf "| of which anonymous (RssAnon) | %.1f MiB | %.1f MiB | %.2f |\n", a/1024, b/1024, a/b}'
awk -v a="$o_file" -v b="$b_file" 'BEGIN{printf "| of which the binary file pages (RssFile) | %.1f MiB | %.1f MiB | %.2f |\n", a/1024, b/1024, a/b}'
awk -v a="$o_hwm" -v b="$b_hwm" 'BEGIN{printf "| peak RSS (VmHWM) | %.1f MiB | %.1f MiB | %.2f |\n", a/1024, b/1024, a/b}'
awk -v a="$o_size" -v b="$b_size" 'BEGIN{printf "| binary (stripped) | %.1f MB | %.1f MB | %.2f |\n", a/1e6, b/1e6, a/b}'
