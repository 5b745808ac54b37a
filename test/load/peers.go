// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// The side-by-side footprint comparison (`make bench-peers`): otelcol-gpubuild
// against the assembly a user would build from contrib instead (otlp receiver,
// spanmetrics connector, awsemf exporter) and a stock otlp -> debug build, all
// at the same Collector version, on the same loads, in one run, rounds
// interleaved so that drift on a shared machine hits every target alike.

// peerLoad is one of the loads every peer is measured at.
type peerLoad struct {
	name string
	load load
}

// peerLoads: the base load (500 spans/s + 10k points/s), 4x base, the team's
// shape (10,000 series exported every 10 s by the SDK, a job a second), and
// one signal at a time (a job a second beside the points, the job series
// beside the spans) for the per-point and per-span CPU costs, spans at two
// densities.
func peerLoads(duration time.Duration) []peerLoad {
	return []peerLoad{
		{"base: 500 spans/s + 10k points/s", load{points: 10000, jobs: 50, interval: time.Second, duration: duration}},
		{"4x base", load{points: 40000, jobs: 200, interval: 250 * time.Millisecond, duration: duration}},
		{"team's shape: 10k series every 10 s", load{points: 1000, jobs: 1, interval: 10 * time.Second, duration: duration}},
		{"points only: 20k points/s", load{points: 20000, jobs: 1, interval: time.Second, duration: duration}},
		{"spans only: 2000 spans/s", load{points: 0, jobs: 200, interval: time.Second, duration: duration}},
		// Ten times denser, as dense as the points-only load: the per-span
		// work outweighs each request's fixed cost (about 20 requests a
		// second in both).
		{"spans only: 20k spans/s", load{points: 0, jobs: 2000, interval: time.Second, duration: duration}},
	}
}

// peer is one collector build under comparison.
type peer struct {
	name   string
	bin    string
	target func(tmp string, round int) (target, error)
	cw     *cloudwatchtest.Server // the CloudWatch endpoint behind it, if it sends PutMetricData
	// loadsLike, when set, limits the peer to the loads whose names contain
	// it, and leaves out its idle run.
	loadsLike string
}

// receiveOnlyPeer is otelcol-gpubuild's binary running stock's pipelines.
const receiveOnlyPeer = "ours, receiving only"

// inMemoryPeer is otelcol-gpubuild on its default configuration with the
// derivation and cumulative state kept in memory only: what it costs
// without the exactly-once guarantee across restarts.
const inMemoryPeer = "ours, state in memory"

// peerRun is what one round measured of one peer at one load.
type peerRun struct {
	cores, rssMiB, anonMiB, binaryMiB, otherFileMiB, points, spans, seconds float64
	// startCPU: CPU seconds before the window (start, settling, warmup).
	startCPU float64
	// For a peer behind the CloudWatch test endpoint (ours): whether every
	// derived build.jobs and the SDK counter's total landed, and what did.
	delivery *result
}

func benchPeers(ctx context.Context, o options) (string, error) {
	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = cw.Close() }()
	logs, err := startLogsSink()
	if err != nil {
		return "", err
	}
	defer logs.close()
	tmp, err := os.MkdirTemp("", "otelcol-gpubuild-peers-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(tmp) }()

	stock, err := buildWithOCB(o.root, "baseline-builder-config.yaml", filepath.Join("baseline", "otelcol-baseline"))
	if err != nil {
		return "", err
	}
	contrib, err := buildWithOCB(o.root, "contrib-builder-config.yaml", filepath.Join("contrib", "otelcol-contrib-assembly"))
	if err != nil {
		return "", err
	}
	ours := filepath.Join(o.root, "bin", "otelcol-gpubuild")
	inMemoryConfig := filepath.Join(tmp, "otelcol-config-state-in-memory.yaml")
	if err := writeInMemoryConfig(filepath.Join(o.root, "otelcol-config.yaml"), inMemoryConfig); err != nil {
		return "", err
	}
	peers := []peer{
		{name: "otelcol-gpubuild", bin: ours, cw: cw, target: func(tmp string, round int) (target, error) {
			return sidecarTarget(o.root, cw, filepath.Join(tmp, fmt.Sprintf("queue-%d-%d", round, time.Now().UnixNano())), o.sidecarEnv...)
		}},
		{name: "contrib assembly", bin: contrib, target: func(tmp string, _ int) (target, error) {
			return contribTarget(contrib, tmp, logs.endpoint())
		}},
		{name: "stock", bin: stock, target: func(tmp string, _ int) (target, error) {
			return baselineTarget(stock, tmp)
		}},
		// Our binary on stock's pipelines splits our per-span cost into what
		// receiving costs this build and what deriving and persisting add.
		{name: receiveOnlyPeer, bin: ours, loadsLike: "spans only", target: func(tmp string, _ int) (target, error) {
			return baselineTarget(ours, tmp)
		}},
		// The same binary and pipelines with nothing persisted before an
		// acknowledgement: the rest of our per-span cost is the guarantee's.
		{name: inMemoryPeer, bin: ours, cw: cw, loadsLike: "spans only", target: func(tmp string, round int) (target, error) {
			t, err := sidecarTarget(o.root, cw, filepath.Join(tmp, fmt.Sprintf("queue-mem-%d-%d", round, time.Now().UnixNano())), o.sidecarEnv...)
			if err != nil {
				return t, err
			}
			t.argv[len(t.argv)-1] = inMemoryConfig
			return t, nil
		}},
	}
	if o.compare != "" {
		p, err := comparedPeer(o, cw)
		if err != nil {
			return "", err
		}
		peers = append(peers, p)
	}
	loads := peerLoads(o.duration)

	cpus := pinCPU(o.pin)
	idle := make(map[string][]idleRun)
	runs := make(map[string]map[string][]peerRun)
	for _, p := range peers {
		runs[p.name] = make(map[string][]peerRun)
	}
	wanted := func(p peer, load string) bool {
		return o.only == "" || strings.Contains(p.name, o.only) || strings.Contains(load, o.only)
	}
	// Each load is run by every build in turn (A, B, C, A, B, C across
	// rounds), each pinned to the same CPU: the builds compared in a round
	// ran minutes apart at most, on the same core.
	for round := 1; round <= o.rounds; round++ {
		var idlePeers []peer
		var idleTargets []target
		for _, p := range peers {
			if p.loadsLike != "" || !wanted(p, "idle") {
				continue
			}
			t, err := p.target(tmp, round)
			if err != nil {
				return "", err
			}
			idlePeers, idleTargets = append(idlePeers, p), append(idleTargets, t)
		}
		if len(idleTargets) > 0 {
			logf("round %d/%d: idle, side by side, for %v", round, o.rounds, o.idleWindow)
			rs, err := idleRunsOf(idleTargets, settled, o.idleWindow, cpus)
			if err != nil {
				return "", err
			}
			for i, p := range idlePeers {
				idle[p.name] = append(idle[p.name], rs[i])
			}
		}
		for _, pl := range loads {
			for _, p := range peers {
				if !wanted(p, pl.name) || !strings.Contains(pl.name, p.loadsLike) {
					continue
				}
				t, err := p.target(tmp, round)
				if err != nil {
					return "", err
				}
				logf("round %d/%d: %s at %s for %v", round, o.rounds, p.name, pl.name, o.duration)
				var cwp *cloudwatchtest.Server
				if p.cw != nil {
					cwp = p.cw
					cwp.Reset() // each run's delivery is judged on its own datums
				}
				r, err := run(ctx, t, pl.load, o.warmup, cwp, cpus)
				if err != nil {
					return "", err
				}
				e := r.sim.Exports
				runs[p.name][pl.name] = append(runs[p.name][pl.name], peerRun{
					cores: r.cpuCores, startCPU: r.startCPU, rssMiB: r.rssMiB, anonMiB: r.anonMiB, binaryMiB: r.binaryMiB, otherFileMiB: r.otherFileMiB,
					points: float64(e.MetricPoints.Items), spans: float64(e.Spans.Items), seconds: r.sim.Elapsed,
					delivery: deliveryOf(r),
				})
			}
		}
	}
	return peersReport(o, cpus, peers, loads, idle, runs), nil
}

// comparedPeer is otelcol-gpubuild as built in another checkout (-compare),
// on that checkout's default configuration, named by its commit.
func comparedPeer(o options, cw *cloudwatchtest.Server) (peer, error) {
	root, err := filepath.Abs(o.compare)
	if err != nil {
		return peer{}, err
	}
	bin := filepath.Join(root, "bin", "otelcol-gpubuild")
	if _, err := os.Stat(bin); err != nil {
		return peer{}, fmt.Errorf("-compare %s: %w (run `make build` there first)", o.compare, err)
	}
	name := "ours at " + filepath.Base(root)
	if out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output(); err == nil {
		name = "ours at " + strings.TrimSpace(string(out))
	}
	return peer{name: name, bin: bin, cw: cw, target: func(tmp string, round int) (target, error) {
		return sidecarTarget(root, cw, filepath.Join(tmp, fmt.Sprintf("queue-cmp-%d-%d", round, time.Now().UnixNano())), o.sidecarEnv...)
	}}, nil
}

// writeInMemoryConfig writes the default configuration without its state
// blocks (the connector's and the processor's state:, the exporter's
// cumulative_state:), so that the derivation and cumulative state live in
// memory only.
func writeInMemoryConfig(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	out, removed := withoutStateBlocks(string(b))
	if removed != 3 {
		return fmt.Errorf("%s: expected 3 state blocks to remove, found %d", src, removed)
	}
	return os.WriteFile(dst, []byte(out), 0o600)
}

// withoutStateBlocks drops every `state:` and `cumulative_state:` key with
// what is indented under it, and says how many it dropped.
func withoutStateBlocks(cfg string) (string, int) {
	var b strings.Builder
	removed, skipIndent := 0, -1
	for _, line := range strings.SplitAfter(cfg, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		indent := len(line) - len(trimmed)
		if skipIndent >= 0 {
			if strings.TrimSpace(trimmed) == "" || indent > skipIndent {
				continue
			}
			skipIndent = -1
		}
		if strings.HasPrefix(trimmed, "state:") || strings.HasPrefix(trimmed, "cumulative_state:") {
			removed++
			skipIndent = indent
			continue
		}
		b.WriteString(line)
	}
	return b.String(), removed
}

// contribTarget runs the contrib assembly: spans become metrics through
// spanmetrics (the job, stage and API spans), metrics go to CloudWatch as
// EMF logs, logs are dropped.
func contribTarget(bin, dir, logsEndpoint string) (target, error) {
	env := append(baseEnv(), "AWS_ACCESS_KEY_ID=AKIDPEERS", "AWS_SECRET_ACCESS_KEY=peers-secret", "AWS_EC2_METADATA_DISABLED=true")
	return peerTarget("contrib assembly (otlp, spanmetrics, awsemf)", bin, filepath.Join(dir, "contrib.yaml"), fmt.Sprintf(`connectors:
  spanmetrics:
    dimensions:
      - name: build.result
      - name: build.stage
      - name: http.route
      - name: http.request.method
      - name: http.response.status_code
exporters:
  awsemf:
    region: us-east-1
    endpoint: %s
    namespace: GPUIndexBuild
    log_group_name: /gpubuild/metrics
    log_stream_name: peers
  nop:
service:
  pipelines:
    traces: {receivers: [otlp], exporters: [spanmetrics]}
    logs: {receivers: [otlp], exporters: [nop]}
    metrics: {receivers: [otlp, spanmetrics], exporters: [awsemf]}
`, logsEndpoint), env)
}

// logsSink is a local CloudWatch Logs endpoint for awsemf: it reads every
// request (PutLogEvents, CreateLogGroup, CreateLogStream) and answers with
// an empty JSON object, which the SDK takes as success for each of them.
type logsSink struct {
	srv      *http.Server
	addr     string
	requests atomic.Int64
}

func startLogsSink() (*logsSink, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &logsSink{addr: l.Addr().String()}
	s.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.requests.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_, _ = w.Write([]byte("{}"))
	})}
	go func() { _ = s.srv.Serve(l) }()
	return s, nil
}

func (s *logsSink) endpoint() string { return "http://" + s.addr }
func (s *logsSink) close()           { _ = s.srv.Close() }

// deliveryOf keeps a run's result where its delivery was checked.
func deliveryOf(r *result) *result {
	if !r.cw {
		return nil
	}
	return r
}

// deliveryLine says in how many of a peer's runs the delivery was exact,
// naming each run that was not: the footprint is compared only where
// nothing was given up for it.
func deliveryLine(name string, loads []peerLoad, runs map[string][]peerRun) string {
	var checked, exact int
	var misses []string
	for _, pl := range loads {
		for i, r := range runs[pl.name] {
			if r.delivery == nil {
				continue
			}
			checked++
			if r.delivery.exact() {
				exact++
				continue
			}
			misses = append(misses, fmt.Sprintf("%s, round %d: build.jobs %.0f of %.0f, counter %.0f of %d",
				pl.name, i+1, r.delivery.jobsLanded, r.delivery.jobsTruth(), r.delivery.counterLanded, r.delivery.sim.SDKMetrics.Counter.Total))
		}
	}
	if checked == 0 {
		return ""
	}
	line := fmt.Sprintf("\nDelivery exact for %s (every derived build.jobs and the SDK counter's total landed at the CloudWatch test endpoint): %d of %d runs", name, exact, checked)
	if len(misses) > 0 {
		line += "; not exact: " + strings.Join(misses, "; ")
	}
	return line + ".\n"
}
