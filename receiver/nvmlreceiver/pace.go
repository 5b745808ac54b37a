// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package nvmlreceiver // import "github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver"

import (
	"sync"
	"time"
)

// pacerClock is the pacer's time source; tests replace it to be exact
// without sleeping.
type pacerClock struct {
	now       func() time.Time
	afterFunc func(d time.Duration, f func()) (stop func() bool)
}

var realPacerClock = pacerClock{
	now: time.Now,
	afterFunc: func(d time.Duration, f func()) func() bool {
		return time.AfterFunc(d, f).Stop
	},
}

// pacer feeds the scraperhelper controller's ticker channel. Unlike the
// controller's own ticker it can wait for an arbitrary deadline, so a
// receiver without a GPU wakes only for its next NVML attempt. At most one
// timer is armed and no goroutine waits: an idle sidecar costs nothing.
type pacer struct {
	clock    pacerClock
	interval time.Duration
	ch       chan time.Time

	mu      sync.Mutex
	stop    func() bool
	armed   uint64    // generation of the armed timer; a timer replaced while firing sends nothing
	tick    time.Time // the last tick of the fixed-rate schedule
	onRate  bool      // tick is meaningful: the schedule has not been broken off
	stopped bool
}

func newPacer(interval time.Duration, clock pacerClock) *pacer {
	// One buffered value: a tick is never lost while a scrape runs, and a
	// fire never blocks.
	return &pacer{clock: clock, interval: interval, ch: make(chan time.Time, 1)}
}

// C is the channel for scraperhelper.WithTickerChannel.
func (p *pacer) C() <-chan time.Time { return p.ch }

// atRate arms the next tick of the fixed-rate schedule, as a ticker would:
// previous tick + interval, skipping ticks already missed, so a slow
// scrape does not shift the cadence. Coming off a wait, the schedule
// restarts from now.
func (p *pacer) atRate() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.now()
	if !p.onRate {
		p.tick, p.onRate = now, true
	}
	next := p.tick.Add(p.interval)
	if next.Before(now) {
		next = next.Add(now.Sub(next).Truncate(p.interval))
		if next.Before(now) {
			next = next.Add(p.interval)
		}
	}
	p.tick = next
	p.armLocked(next.Sub(now))
}

// after arms one tick d from now and nothing before it.
func (p *pacer) after(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onRate = false
	p.armLocked(d)
}

// shutdown disarms the pacer for good: nothing is sent after it returns.
func (p *pacer) shutdown() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	if p.stop != nil {
		p.stop()
		p.stop = nil
	}
}

func (p *pacer) armLocked(d time.Duration) {
	if p.stopped {
		return
	}
	if p.stop != nil {
		p.stop()
	}
	p.armed++
	gen := p.armed
	p.stop = p.clock.afterFunc(max(d, 0), func() { p.fire(gen) })
}

func (p *pacer) fire(gen uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped || gen != p.armed {
		return
	}
	select {
	case p.ch <- p.clock.now():
	default: // a tick is already waiting; the controller scrapes once for both
	}
}
