// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// baseCommit is the release whose state directory the upgrade must read:
// the collector as it was before its derivation state was persisted (only
// the exporter's queue in file_storage). Building it from source, rather
// than committing a state directory it wrote, keeps the old side real: the
// old binary writes the state the way it does, with the test's own data and
// timestamps (a committed queue would hold datums too old for CloudWatch).
const baseCommit = "0ba751f5898cb529af2f7dfa9be7560bef7be434"

// baseBinary builds the collector at baseCommit once into .run/ (or takes
// $OTELCOL_GPUBUILD_BASE_BIN); the Go build cache makes rebuilding cheap.
func baseBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("OTELCOL_GPUBUILD_BASE_BIN"); b != "" {
		return b
	}
	out := repoPath(filepath.Join(".run", "lifecycle-base-"+baseCommit[:12], "otelcol-gpubuild"))
	if _, err := os.Stat(out); err == nil {
		return out
	}
	src := t.TempDir()
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", repoPath("."), baseCommit, src)
	b, err := archive.CombinedOutput()
	require.NoError(t, err, "extracting %s: %s", baseCommit, b)
	build := exec.Command("go", "build", "-trimpath", "-o", out, ".")
	build.Dir = filepath.Join(src, "distro")
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	b, err = build.CombinedOutput()
	require.NoError(t, err, "building %s: %s", baseCommit, b)
	return out
}

// The previous release runs, derives and queues (the endpoint is down for
// the second wave, so its counts sit in the persistent queue when it stops);
// the binary under test starts on the same state directory and must deliver
// what was queued, count the rest, and count nothing twice but what the
// documented exception names: the previous release kept no baselines for
// the service's cumulative histograms, so api.requests counts the requests
// it had already derived a second time, once. The service exports its
// metrics only when the test flushes it, so that what each release saw is
// known: waves one and two reach the previous release, wave three the new
// one.
func TestLifecycleUpgrade(t *testing.T) {
	const name = "lifecycle-upgrade"
	old := baseBinary(t)
	e := newEnv(t)
	col := e.startPreviousRelease(old)
	svc := e.startService(name, flushedMetrics)
	tr := newTally()
	svc.wave(tr, 20)
	svc.flush()
	e.awaitSDKDelivered(name, tr)
	require.NoError(t, e.cw.SetDown(true))
	svc.wave(tr, 20)
	// Over gRPC the SDK drops a batch sent while no collector listens, so
	// the second wave is handed to the previous release before it stops.
	svc.flush()
	col.stop()
	tr.recountSoFar()
	require.NoError(t, e.cw.SetDown(false))
	e.startCollector(binary(t))
	svc.wave(tr, 20)
	svc.flush()
	e.awaitSDKDelivered(name, tr)
	svc.checkServiceTruth(tr)
	svc.stop()
	e.awaitExact(name, tr, scenarioDeadline)
}
