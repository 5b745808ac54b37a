package derive

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/otel/attribute"
)

// The derivation state is read back from disk, where anything can have
// happened to it. Whatever one entry of the fixture holds, the sidecar
// starts, goes on and shuts down without a crash, and counts no run twice:
// the fixture's state holds two successful runs not yet flushed and one
// active, and one more run completes after the start, so at most four.
func FuzzRestoredDerivationState(f *testing.F) {
	fixture := loadFixture(f)
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range fixture {
			if !yield(k) {
				return
			}
		}
	})
	for i, k := range keys {
		f.Add(uint8(i), fixture[k])
	}
	f.Add(uint8(0), []byte{})
	f.Add(uint8(1), []byte{stateFormatV1})

	f.Fuzz(func(t *testing.T, entry uint8, value []byte) {
		entries := loadFixture(t)
		entries[keys[int(entry)%len(keys)]] = value
		dir := t.TempDir()
		writeEntries(t, dir, entries)

		clock := func() time.Time { return fixtureTime.Add(time.Minute) }
		svc := newTestService(t, newOTLPSink(t), attribute.String("service.name", "vector-index-build"))
		sink := new(consumertest.MetricsSink)
		s := startSidecar(t, dir, nil, sink, clock)
		svc.status("job-9", completed, fixtureTime.Add(50*time.Second))
		svc.status("job-10", running, fixtureTime.Add(10*time.Second))
		svc.status("job-10", completed, fixtureTime.Add(40*time.Second))
		s.consumeLogs(svc)
		require.NoError(t, s.sigterm())

		if n := landed(metricBuildJobs, success, sink); n > 4 {
			t.Fatalf("%d successful runs counted, at most 4 happened", n)
		}
		for _, md := range sink.AllMetrics() {
			for _, p := range points(md) {
				if p.value < 0 {
					t.Fatalf("%s %v: %d", p.metric, p.attrs, p.value)
				}
			}
		}
	})
}
