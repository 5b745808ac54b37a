// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package distro

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
)

// sendBurst exports `metrics` cumulative sums of `series` points each over
// OTLP/HTTP, one request per metric, as a service's SDK export does.
func sendBurst(t *testing.T, port, metrics, series int) {
	t.Helper()
	start := pcommon.NewTimestampFromTime(time.Now().Add(-time.Minute))
	now := pcommon.NewTimestampFromTime(time.Now())
	for m := range metrics {
		md := pmetric.NewMetrics()
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("service.name", "distro-burst")
		metric := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		metric.SetName(fmt.Sprintf("distro.burst.%d", m))
		metric.SetUnit("{vector}")
		sum := metric.SetEmptySum()
		sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		sum.SetIsMonotonic(true)
		for i := range series {
			p := sum.DataPoints().AppendEmpty()
			p.Attributes().PutStr("index.shard", fmt.Sprintf("shard-%d", i))
			p.SetStartTimestamp(start)
			p.SetTimestamp(now)
			p.SetIntValue(int64(i + 1))
		}
		body, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
		require.NoError(t, err)
		resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/v1/metrics", port), "application/x-protobuf", bytes.NewReader(body))
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
}

// forcedGC ends a GC trace line of a collection the program asked for.
const forcedGC = " (forced)"

// burstThenQuiet sends a burst to a sidecar started with the given
// environment (and the runtime's GC trace), waits until its last metric
// was exported, and returns the sidecar and where its output stood then.
func burstThenQuiet(t *testing.T, env ...string) (*sidecar, int) {
	t.Helper()
	s := startSidecar(t, append(env, "GODEBUG=gctrace=1")...)
	s.waitOutput(t, "dry run", 10*time.Second)
	const metrics = 4
	sendBurst(t, s.httpPort, metrics, 4000)
	last := fmt.Sprintf(`"distro.burst.%d"`, metrics-1)
	require.True(t, binarytest.Eventually(30*time.Second, func() bool { return strings.Contains(s.Stdout.String(), last) }),
		"the burst was never exported")
	return s, len(s.Output.String())
}

// awaitGivenBack waits, after a quiet moment (`after`: "the burst", "the
// start") that began at output offset from, for a forced collection in the
// runtime's trace and for the anonymous memory to fall by at least fallKiB
// below its peak before that collection, then stops the sidecar. The peak
// is sampled until the collection shows, not read once: the quiet moment
// still allocates a little (the pipeline health's first read, a scrape),
// and a sample taken before that would count it against the release.
func awaitGivenBack(t *testing.T, s *sidecar, from int, after string, fallKiB int64) {
	t.Helper()
	var peak int64
	require.True(t, binarytest.Eventually(15*time.Second, func() bool {
		collected := strings.Contains(s.Output.String()[from:], forcedGC)
		if !collected { // sampled only before the collection is seen
			if now, err := binarytest.AnonKiB(s.Pid()); err == nil {
				peak = max(peak, now)
			}
		}
		return collected
	}), "no forced collection after %s", after)
	var anon int64
	var err error
	assert.True(t, binarytest.Eventually(5*time.Second, func() bool {
		anon, err = binarytest.AnonKiB(s.Pid())
		return err == nil && anon < peak-fallKiB
	}), "anonymous memory %d KiB after the release, at most %d KiB after %s", anon, peak, after)
	t.Logf("anonymous memory: at most %d KiB after %s, %d KiB once given back", peak, after, anon)
	require.NoError(t, s.terminate(t, 20*time.Second))
}

// After a burst of work, once allocation has been quiet for two seconds,
// the sidecar collects its heap and gives it back to the operating system
// (internal/runtimetuning): the runtime's trace shows a forced collection,
// and the anonymous memory falls.
func TestHeapGivenBackAfterABurst(t *testing.T) {
	s, exported := burstThenQuiet(t)
	awaitGivenBack(t, s, exported, "the burst", 4096)
}

// Starting is a burst too: parsing the configuration and starting the
// components leave garbage that an idle sidecar would keep until its next
// collection. With no traffic at all, the sidecar gives it back within
// seconds of starting.
func TestHeapGivenBackAfterStart(t *testing.T) {
	s := startSidecar(t, "GODEBUG=gctrace=1")
	s.waitOutput(t, "dry run", 10*time.Second)
	// The start leaves 1-3 MiB of garbage (measured: 1.4-2.6 MiB given
	// back), and the release needs 1 MiB reclaimable by the runtime's own
	// count, of which a page or two may be live again by the time it runs.
	awaitGivenBack(t, s, 0, "the start", 512)
}

// Starting reads most of the binary into memory (the kernel's read-ahead,
// every factory's code), of which an idle sidecar runs a fraction. About
// ten seconds after the start its resident file pages fall to less than
// half of their peak: the executable's pages were given back
// (internal/runtimetuning/exepages), and only those it goes on running are read again.
// So do the pages it maps of the libraries it was linked with (libc and
// the dynamic loader, for cgo), which it runs almost nothing of once
// started.
// Two sidecars run from one copy of the binary, read from disk as a
// node reads an image (not the linker's output in the page cache, which
// other tests' sidecars map too), and start together as pods from one
// image on a node do: each gives its pages back although the other maps
// them. The peak is sampled from the start on, so a slow start is no
// excuse.
func TestStartCodeGivenBack(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "otelcol-gpubuild")
	copyFile(t, binarytest.Binary(t), bin, 0o755)
	require.NoError(t, binarytest.EvictFromPageCache(bin))
	sidecars := []*sidecar{startSidecarAt(t, bin), startSidecarAt(t, bin)}
	peak, file := make([]int64, len(sidecars)), make([]int64, len(sidecars))
	libPeak, lib := make([]int64, len(sidecars)), make([]int64, len(sidecars))
	assert.True(t, binarytest.Eventually(25*time.Second, func() bool {
		all := true
		for i, s := range sidecars {
			now, err := binarytest.FileKiB(s.Pid())
			if err != nil {
				return false
			}
			libNow, err := binarytest.LibraryKiB(s.Pid())
			if err != nil {
				return false
			}
			file[i], peak[i] = now, max(peak[i], now)
			lib[i], libPeak[i] = libNow, max(libPeak[i], libNow)
			all = all && file[i] < peak[i]/2 && lib[i] < libPeak[i]/2
		}
		return all
	}), "resident file pages %v KiB, at most %v KiB since the start; of libraries %v KiB, at most %v KiB", file, peak, lib, libPeak)
	t.Logf("resident file pages: at most %v KiB after the start, %v KiB once given back; of libraries %v and %v KiB", peak, file, libPeak, lib)
	for _, s := range sidecars {
		s.waitOutput(t, "dry run", time.Second) // it ran, and started as configured
		require.NoError(t, s.terminate(t, 20*time.Second))
	}
}

// copyFile copies the file at from to a new file at to.
func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, b, mode))
}

// GPUBUILD_RELEASE_IDLE_MEMORY=false keeps the runtime's and the kernel's
// own behaviour: no forced collection in the quiet after the burst (the
// release above comes within about three seconds; this waits eight), and
// the executable's pages stay (given back ten seconds after the start when
// on; this looks until fifteen).
func TestHeapKeptWhenReleaseIsOff(t *testing.T) {
	started := time.Now()
	s, exported := burstThenQuiet(t, "GPUBUILD_RELEASE_IDLE_MEMORY=false")
	file, err := binarytest.FileKiB(s.Pid())
	require.NoError(t, err)
	assert.False(t, binarytest.Eventually(8*time.Second, func() bool {
		return strings.Contains(s.Output.String()[exported:], forcedGC)
	}), "a forced collection although the release is off")
	assert.False(t, binarytest.Eventually(time.Until(started.Add(15*time.Second)), func() bool {
		now, err := binarytest.FileKiB(s.Pid())
		return err == nil && now < file/2
	}), "the executable's pages were given back although the release is off")
	require.NoError(t, s.terminate(t, 20*time.Second))
}
