package distro

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/test/internal/binarytest"
)

// sendBurst exports metrics cumulative sums of series points each in
// OTLP/JSON, one request per metric, as a service's SDK export does.
func sendBurst(t *testing.T, port, metrics, series int) {
	t.Helper()
	start := time.Now().Add(-time.Minute).UnixNano()
	now := time.Now().UnixNano()
	for m := range metrics {
		var b strings.Builder
		fmt.Fprintf(&b, `{"resourceMetrics":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"distro-burst"}}]},"scopeMetrics":[{"metrics":[{"name":"distro.burst.%d","unit":"{vector}","sum":{"aggregationTemporality":2,"isMonotonic":true,"dataPoints":[`, m)
		for i := range series {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"attributes":[{"key":"index.shard","value":{"stringValue":"shard-%d"}}],"startTimeUnixNano":"%d","timeUnixNano":"%d","asInt":"%d"}`, i, start, now, i+1)
		}
		b.WriteString(`]}}]}]}]}`)
		resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/v1/metrics", port), "application/json", strings.NewReader(b.String()))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
}

var forcedGC = " (forced)"

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

// After a burst of work, once allocation has been quiet for two seconds,
// the sidecar collects its heap and gives it back to the operating system
// (distro/idlememory.go): the runtime's trace shows a forced collection,
// and the anonymous memory falls.
func TestHeapGivenBackAfterABurst(t *testing.T) {
	s, exported := burstThenQuiet(t)
	anonAfterBurst, err := binarytest.AnonKiB(s.Pid())
	require.NoError(t, err)
	require.True(t, binarytest.Eventually(15*time.Second, func() bool {
		return strings.Contains(s.Output.String()[exported:], forcedGC)
	}), "no forced collection after the burst")
	var anon int64
	assert.True(t, binarytest.Eventually(5*time.Second, func() bool {
		anon, err = binarytest.AnonKiB(s.Pid())
		return err == nil && anon < anonAfterBurst-4096
	}), "anonymous memory %d KiB after the release, %d KiB after the burst", anon, anonAfterBurst)
	t.Logf("anonymous memory: %d KiB after the burst, %d KiB once given back", anonAfterBurst, anon)
	require.NoError(t, s.terminate(t, 20*time.Second))
}

// GPUBUILD_RELEASE_IDLE_MEMORY=false keeps the runtime's own behaviour: no
// forced collection in the quiet after the burst (the release above comes
// within about three seconds; this waits eight).
func TestHeapKeptWhenReleaseIsOff(t *testing.T) {
	s, exported := burstThenQuiet(t, "GPUBUILD_RELEASE_IDLE_MEMORY=false")
	assert.False(t, binarytest.Eventually(8*time.Second, func() bool {
		return strings.Contains(s.Output.String()[exported:], forcedGC)
	}), "a forced collection although the release is off")
	require.NoError(t, s.terminate(t, 20*time.Second))
}
