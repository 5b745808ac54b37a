// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package idlememory gives the heap a burst of work leaves behind back to
// the operating system once the process has gone quiet.
//
// The Go runtime collects garbage only when the heap grows to its goal
// (twice the live heap by default), and returns to the operating system
// only memory beyond about 110 % of that goal. A process that works in
// bursts and is quiet in between (a sidecar receiving a service's metric
// exports every 10 s, or whose service is idle between builds) therefore
// keeps the garbage of its last burst (starting is one), and memory as
// large as its heap goal, resident until the next burst. Once allocation
// has stayed quiet for a while, one forced collection and scavenge
// (debug.FreeOSMemory) brings the resident heap down to what is live; the
// next burst grows it again. The peak is not raised: only the time
// between bursts is cheaper, for one forced collection per quiet period
// (at 10,000 series every 10 s: anonymous memory 18 MiB instead of 32, for
// under 0.01 more cores).
//
// An idle process is not woken every second for it: once allocation has
// stayed quiet for the quiet period the sampling interval doubles, up to
// MaxEvery, and the quiet threshold scales with it (bytes a second); the
// first sample that sees more allocation than that brings it back to Every.
// Once the heap has been given back twice with no burst since, or nothing
// but the trickle was allocated for two MaxEveryReleased (an idle process
// may have nothing worth giving back twice), the interval may grow
// further, up to MaxEveryReleased: there is nothing left to give back but
// the trickle, and a burst is still seen at the next sample (the
// threshold stops scaling at MaxEvery, so a burst is not hidden by the
// long interval) and given back Quiet samples of Every later.
// Nor is it collected over and over while it stays quiet: each release
// without a burst since the previous one doubles the quiet samples the
// next one needs, up to MaxQuiet; the trickle an idle sidecar allocates
// (its own telemetry read every minute, the scrapes) would otherwise cost
// a forced collection every half minute for the same megabyte or two.
package idlememory // import "github.com/gpubuild/otelcol-gpubuild/internal/runtimetuning/idlememory"

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/gpubuild/otelcol-gpubuild/internal/confmap/envflag"
)

// EnvVar turns the release off (false); unset or empty means on.
const EnvVar = "GPUBUILD_RELEASE_IDLE_MEMORY"

// Enabled reads EnvVar: on unless it is false; a value that is not a
// boolean is an error naming the variable.
func Enabled(lookupEnv func(string) (string, bool)) (bool, error) {
	return envflag.Bool(lookupEnv, EnvVar, true)
}

// Config says when the heap is given back.
type Config struct {
	// Every is how often allocation is sampled while the process is busy.
	Every time.Duration
	// MaxEvery bounds the interval, doubled at each quiet sample once the
	// process has been quiet for Quiet samples (at most Every: no backing
	// off). A burst after a long quiet period is seen at the next sample,
	// at most MaxEvery later.
	MaxEvery time.Duration
	// MaxEveryReleased bounds the interval once the heap was given back
	// twice with no burst since, or once nothing but the trickle was
	// allocated for twice MaxEveryReleased (an idle process whose heap has
	// nothing left to give back: it may never be released twice); at most
	// MaxEvery: no further backing off. A process bursting at least every
	// MaxEveryReleased (an SDK's 60 s export) keeps MaxEvery.
	// Twice: a process working in regular bursts (an SDK exporting every
	// 10 s) gives its heap back once between two bursts, and a longer
	// interval would let a burst's heap wait for a sample past the next.
	// The quiet threshold does not scale beyond MaxEvery: a sample after
	// a longer interval is a burst when it saw more than MaxEvery's share.
	MaxEveryReleased time.Duration
	// Quiet is how many samples in a row must each have allocated at most
	// QuietBytes a period of Every before the heap is given back.
	Quiet      int
	QuietBytes uint64
	// MaxQuiet bounds the quiet samples a release needs, doubled after
	// each release that followed another with no burst in between (at
	// most Quiet: no backing off). The first release after a burst needs
	// Quiet.
	MaxQuiet int
	// MinBytes: the heap is given back only when at least this much of it
	// is garbage or free and still resident (not worth a collection below).
	MinBytes uint64
}

// DefaultConfig gives the heap back after two seconds of under 512 KiB
// allocated a second, when at least 1 MiB can be given back. Once the
// process has stayed quiet it samples every 8 s, and once it has given its
// heap back twice, or stayed quiet for two minutes, once a minute: a burst
// (over 4 MiB allocated since the last sample) is given back two seconds
// after the sample that sees it. While it stays quiet, each release needs twice the quiet
// samples of the previous one, up to 16. A sidecar's
// idle heap is a few MiB (what its start left behind): 1 MiB is a fair
// share of it, and a collection of a heap that small costs a few
// milliseconds of CPU once per quiet period.
func DefaultConfig() Config {
	return Config{Every: time.Second, MaxEvery: 8 * time.Second, MaxEveryReleased: time.Minute, Quiet: 2, MaxQuiet: 16,
		QuietBytes: 512 << 10, MinBytes: 1 << 20}
}

// Sample is what the decision reads from the runtime.
type Sample struct {
	// At is when it was read; the quiet threshold is QuietBytes for each
	// Every since the previous sample, up to MaxEvery (zero: one period).
	At time.Time
	// Allocated is the total of bytes ever allocated on the heap.
	Allocated uint64
	// Reclaimable is heap memory that is resident but not live: objects
	// dead since the last collection, and free spans not yet returned.
	Reclaimable uint64
}

// Decider decides from successive samples; it holds no runtime state.
type Decider struct {
	cfg   Config
	prev  Sample
	quiet int
	calm  int // quiet samples in a row, releases or not
	// calmFor is the time those quiet samples cover.
	calmFor time.Duration
	needed  int // quiet samples the next release needs
	wait    time.Duration
	began   bool
	// releases: times the heap was given back since the last burst.
	releases int
}

// NewDecider returns a decider for cfg.
func NewDecider(cfg Config) *Decider {
	return &Decider{cfg: cfg, wait: cfg.Every, needed: cfg.Quiet}
}

// Wait is how long to wait for the next sample: Every until the process
// has been quiet for Quiet samples, then twice the last wait, up to
// MaxEvery (MaxEveryReleased once the heap was given back twice since
// the last burst, or after twice MaxEveryReleased with no burst).
func (d *Decider) Wait() time.Duration { return d.wait }

// quietBytes is the threshold for a sample taken elapsed after the
// previous one: QuietBytes for each Every, up to MaxEvery.
func (d *Decider) quietBytes(elapsed time.Duration) uint64 {
	if d.cfg.MaxEvery > 0 {
		elapsed = min(elapsed, d.cfg.MaxEvery)
	}
	if elapsed <= d.cfg.Every || d.cfg.Every <= 0 {
		return d.cfg.QuietBytes
	}
	return uint64(float64(d.cfg.QuietBytes) * float64(elapsed) / float64(d.cfg.Every))
}

// Release reports whether the heap should be given back now, given the
// latest sample. After a release the quiet count starts again, and while
// no burst comes the count needed doubles (up to MaxQuiet), so a process
// that stays quiet is not collected over and over.
func (d *Decider) Release(s Sample) bool {
	prev, began := d.prev, d.began
	d.prev, d.began = s, true
	if !began {
		return false
	}
	elapsed := s.At.Sub(prev.At)
	if s.Allocated-prev.Allocated > d.quietBytes(elapsed) {
		d.quiet, d.calm, d.calmFor, d.wait, d.needed, d.releases = 0, 0, 0, d.cfg.Every, d.cfg.Quiet, 0
		return false
	}
	d.quiet++
	d.calm++
	d.calmFor += elapsed
	if d.calm >= d.cfg.Quiet {
		bound := d.cfg.MaxEvery
		if d.releases >= 2 || d.calmFor >= 2*d.cfg.MaxEveryReleased {
			bound = max(bound, d.cfg.MaxEveryReleased)
		}
		d.wait = max(min(2*d.wait, bound), d.cfg.Every)
	}
	if d.quiet < d.needed || s.Reclaimable < d.cfg.MinBytes {
		return false
	}
	d.quiet = 0
	d.releases++
	if d.cfg.MaxQuiet > d.needed {
		d.needed = min(2*d.needed, d.cfg.MaxQuiet)
	}
	return true
}

// Run samples the runtime as the decider says (every cfg.Every while the
// process is busy) until ctx is done, giving the heap back when it says so.
func Run(ctx context.Context, cfg Config) {
	d := NewDecider(cfg)
	r := newReader()
	t := time.NewTimer(d.Wait())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if d.Release(r.read()) {
				debug.FreeOSMemory()
			}
			t.Reset(d.Wait())
		}
	}
}

// reader reads a Sample from runtime/metrics, reusing its buffers.
type reader struct{ samples []metrics.Sample }

// The metrics a Sample is made of, by their index in reader.samples.
const (
	allocsIndex  = iota // bytes ever allocated on the heap
	objectsIndex        // live objects and those dead since the last collection
	freeIndex           // free heap not yet returned to the operating system
	liveIndex           // live at the last collection
	sampleCount
)

func newReader() *reader {
	r := &reader{samples: make([]metrics.Sample, sampleCount)}
	r.samples[allocsIndex].Name = "/gc/heap/allocs:bytes"
	r.samples[objectsIndex].Name = "/memory/classes/heap/objects:bytes"
	r.samples[freeIndex].Name = "/memory/classes/heap/free:bytes"
	r.samples[liveIndex].Name = "/gc/heap/live:bytes"
	return r
}

func (r *reader) read() Sample {
	metrics.Read(r.samples)
	v := func(i int) uint64 {
		if r.samples[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return r.samples[i].Value.Uint64()
	}
	objects, live := v(objectsIndex), v(liveIndex)
	dead := uint64(0)
	if objects > live {
		dead = objects - live
	}
	return Sample{At: time.Now(), Allocated: v(allocsIndex), Reclaimable: dead + v(freeIndex)}
}
