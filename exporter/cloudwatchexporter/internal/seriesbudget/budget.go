// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package seriesbudget bounds how many series (dimension sets) each metric
// may have: past the budget a new series is refused, so that the caller
// folds it into an overflow series. A series idle longer than the TTL frees
// its place. It also tells which dimension has the most distinct values, the
// one that explodes.
package seriesbudget // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/seriesbudget"

import (
	"sync"
	"time"
)

// Dimension is one dimension of a new series: its name and a hash of its value.
type Dimension struct {
	Name      string
	ValueHash uint64
}

// Overflow describes a metric past its budget, for a warning.
type Overflow struct {
	Metric    string
	Series    int    // series admitted
	Dimension string // the dimension with the most distinct values among them
	Distinct  int    // its distinct values (counted up to the budget)
}

// Budget is safe for concurrent use.
type Budget struct {
	max       int
	ttl       time.Duration
	warnEvery time.Duration

	mu      sync.Mutex
	metrics map[string]*metricSeries
	// lastSweep is when every metric was last swept: names come and go
	// (an id in a metric name), and an idle one would otherwise stay.
	lastSweep time.Time
}

type metricSeries struct {
	lastSeen  map[uint64]int64               // Unix nanoseconds: no pointer for the GC to follow
	values    map[string]map[uint64]struct{} // per dimension name, capped at max
	lastSweep time.Time
	lastWarn  time.Time
}

// New returns a budget of max series per metric; a series not seen for ttl
// is forgotten; Admit reports an overflow at most once per warnEvery per metric.
func New(maxSeries int, ttl, warnEvery time.Duration) *Budget {
	return &Budget{max: maxSeries, ttl: ttl, warnEvery: warnEvery, metrics: map[string]*metricSeries{}}
}

// Admit reports whether series of metric may be sent as itself: it is known,
// or there is room for it. dims is called only for a series not yet known.
// When the series is refused, overflow is non-nil at most once per warnEvery.
func (b *Budget) Admit(metric string, series uint64, now time.Time, dims func() []Dimension) (admitted bool, overflow *Overflow) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Sub(b.lastSweep) >= b.ttl/4 {
		b.sweepAll(now)
	}
	m := b.metrics[metric]
	if m == nil {
		m = &metricSeries{lastSeen: map[uint64]int64{}, values: map[string]map[uint64]struct{}{}}
		b.metrics[metric] = m
	}
	seen := now.UnixNano()
	if _, ok := m.lastSeen[series]; ok {
		m.lastSeen[series] = seen
		return true, nil
	}
	if len(m.lastSeen) >= b.max && now.Sub(m.lastSweep) >= b.ttl/4 {
		m.lastSweep = now
		m.sweep(now, b.ttl)
	}
	if len(m.lastSeen) < b.max {
		m.lastSeen[series] = seen
		for _, d := range dims() {
			vals := m.values[d.Name]
			if vals == nil {
				vals = map[uint64]struct{}{}
				m.values[d.Name] = vals
			}
			if len(vals) < b.max {
				vals[d.ValueHash] = struct{}{}
			}
		}
		return true, nil
	}
	if !m.lastWarn.IsZero() && now.Sub(m.lastWarn) < b.warnEvery {
		return false, nil
	}
	m.lastWarn = now
	o := &Overflow{Metric: metric, Series: len(m.lastSeen)}
	for name, vals := range m.values {
		if len(vals) > o.Distinct || (len(vals) == o.Distinct && name < o.Dimension) {
			o.Dimension, o.Distinct = name, len(vals)
		}
	}
	return false, o
}

// sweep forgets the series of m idle longer than ttl.
func (m *metricSeries) sweep(now time.Time, ttl time.Duration) {
	oldest := now.UnixNano() - int64(ttl)
	for s, last := range m.lastSeen {
		if last < oldest {
			delete(m.lastSeen, s)
		}
	}
}

// sweepAll sweeps every metric and forgets those left without a series
// (and without a warning still holding back the next).
func (b *Budget) sweepAll(now time.Time) {
	b.lastSweep = now
	for name, m := range b.metrics {
		m.sweep(now, b.ttl)
		if len(m.lastSeen) == 0 && now.Sub(m.lastWarn) >= b.warnEvery {
			delete(b.metrics, name)
		}
	}
}

// Series is the number of series of metric admitted now.
func (b *Budget) Series(metric string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if m := b.metrics[metric]; m != nil {
		return len(m.lastSeen)
	}
	return 0
}
