package cumulative // import "github.com/gpubuild/otelcol-gpubuild/internal/cumulative"

import (
	"context"
	"go.uber.org/zap"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// Tracker rewrites cumulative monotonic sums, cumulative histograms and
// summaries into deltas, in place, before the data enters the sending queue.
//
// Converting before the queue, not at send time, is what makes retries exact:
// a retried or replayed request (from memory or from the persistent queue
// after a restart) carries the same deltas as the first attempt, whereas a
// cumulative point translated again would give a zero delta on retry.
//
// Per series (resource + scope + metric + point attributes) it remembers the
// last point and the one before, so that:
//   - the first point of a series is sent as it is when its start time is
//     known (it is the delta since that start), otherwise it is the baseline;
//   - a new start time, or a value/bucket falling, is a reset: the point is
//     sent as it is (the delta since the reset), never as a negative delta;
//   - the same point delivered twice gives the same delta twice;
//   - an older point than the last one is dropped (the last delta covers it).
//
// The state is bounded by a TTL and a series count (least recently seen is
// forgotten first). A series that comes back after being forgotten cannot be
// told from a new one by its start time alone, so first points whose start
// time is not after the newest forgotten point (the watermark) are baselines:
// at worst one interval is not sent, never the whole total twice.
//
// With a storage client (cumulative_state.storage) the state also survives a
// restart: see cumulativestate.go.
type Tracker struct {
	cfg    Config
	logger *zap.Logger

	mu        sync.Mutex
	series    map[uint64]*series
	lru       seriesList
	watermark pcommon.Timestamp
	// warned rate-limits warnings by metric name and kind of warning.
	warned warnLimiter

	// store is nil when the state lives in memory only.
	store *stateStore

	// scratch space for the point being converted
	scratchBounds             []float64
	scratchCounts, scratchNeg []uint64
}

// series is the state of one cumulative series.
type series struct {
	key          uint64
	newer, older *series
	seen         time.Time // when a point of it last arrived
	kind         seriesKind

	cur, prev snapshot
	hasPrev   bool
	curSent   bool // cur was sent as a first point (delta since its start)
	// unknown: the series was saved but its state could not be read, so
	// its next point is a baseline (it may have been sent before).
	unknown bool
	// storeKey is its key in the storage once saved or restored, else "".
	storeKey string
}

// snapshot is one cumulative point.
type snapshot struct {
	start, ts pcommon.Timestamp

	// sums
	isInt    bool
	intValue int64
	value    float64

	// histograms and summaries
	count          uint64
	sum            float64
	min, max       float64
	hasMin, hasMax bool
	bounds         []float64 // explicit bounds
	counts         []uint64  // explicit bucket counts, or positive exponential buckets
	// exponential histograms
	scale                int32
	zeroCount            uint64
	posOffset, negOffset int32
	neg                  []uint64
}

// seriesKind says how two points of a series compare.
type seriesKind uint8

const (
	sumSeries seriesKind = iota
	histogramSeries
	exponentialSeries
	summarySeries
)

// fell reports whether p is below prev: a reset.
func (k seriesKind) fell(p, prev *snapshot) bool {
	switch k {
	case sumSeries:
		return sumFell(p, prev)
	case exponentialSeries:
		return exponentialFell(p, prev)
	default:
		return histogramFell(p, prev)
	}
}

// layoutChanged reports whether p and prev cannot be subtracted.
func (k seriesKind) layoutChanged(p, prev *snapshot) bool {
	return k == histogramSeries && explicitLayoutChanged(p, prev)
}

// outcome of converting one point.
type outcome uint8

const (
	emitAsIs  outcome = iota // send the point unchanged: it is the delta since its start
	emitDelta                // send the difference from the previous point
	drop
)

// convert rewrites every cumulative point in md into a delta, removes the
// points that cannot be converted and counts them in cv.Dropped. It appends
// to cv.Records the points that moved their series on, for undo and save.
// ctx bounds the reads of saved state.
func (c *Tracker) Convert(ctx context.Context, md pmetric.Metrics, now time.Time, cv *Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expire(now, cv)
	rms := md.ResourceMetrics()
	for ri := 0; ri < rms.Len(); ri++ {
		rm := rms.At(ri)
		resHash := hashMap(rm.Resource().Attributes())
		sms := rm.ScopeMetrics()
		for si := 0; si < sms.Len(); si++ {
			sm := sms.At(si)
			scopeHash := hashStrings(sm.Scope().Name(), sm.Scope().Version())
			ms := sm.Metrics()
			for mi := 0; mi < ms.Len(); mi++ {
				m := ms.At(mi)
				c.convertMetric(ctx, m, metricHash(resHash, scopeHash, m), now, cv)
			}
		}
	}
}

// metricHash identifies a metric: resource, scope, name and type. A series'
// key is mix(metricHash, hashMap(point attributes)).
func metricHash(resHash, scopeHash uint64, m pmetric.Metric) uint64 {
	return mix(resHash, scopeHash, hashStrings(m.Name(), ""), uint64(m.Type()))
}

// record notes that the point at ts moved series key on.
func (cv *Result) record(key uint64, ts pcommon.Timestamp, out outcome, moved bool) {
	if moved {
		cv.Records = append(cv.Records, Record{key: key, ts: ts, sent: out != drop})
	}
}

func (c *Tracker) convertMetric(ctx context.Context, m pmetric.Metric, base uint64, now time.Time, cv *Result) {
	switch m.Type() {
	case pmetric.MetricTypeSum:
		sum := m.Sum()
		if !sum.IsMonotonic() || sum.AggregationTemporality() != pmetric.AggregationTemporalityCumulative {
			return
		}
		sum.DataPoints().RemoveIf(func(dp pmetric.NumberDataPoint) bool {
			if dp.Flags().NoRecordedValue() {
				return true
			}
			key := mix(base, hashMap(dp.Attributes()))
			p := snapshot{start: dp.StartTimestamp(), ts: dp.Timestamp()}
			if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
				p.isInt, p.intValue = true, dp.IntValue()
			} else {
				p.value = dp.DoubleValue()
			}
			s, out, reason, moved := c.step(ctx, key, &p, now, sumSeries, cv)
			cv.record(key, p.ts, out, moved)
			switch out {
			case drop:
				c.dropped(cv, reason, m.Name())
				return true
			case emitDelta:
				dp.SetStartTimestamp(s.prev.ts)
				if p.isInt {
					dp.SetIntValue(p.intValue - s.prev.intValue)
				} else {
					dp.SetDoubleValue(p.value - s.prev.value)
				}
			}
			return false
		})
		sum.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)

	case pmetric.MetricTypeHistogram:
		h := m.Histogram()
		if h.AggregationTemporality() != pmetric.AggregationTemporalityCumulative {
			return
		}
		h.DataPoints().RemoveIf(func(dp pmetric.HistogramDataPoint) bool {
			if dp.Flags().NoRecordedValue() {
				return true
			}
			key := mix(base, hashMap(dp.Attributes()))
			p := snapshot{
				start: dp.StartTimestamp(), ts: dp.Timestamp(),
				count: dp.Count(), sum: dp.Sum(),
				min: dp.Min(), hasMin: dp.HasMin(), max: dp.Max(), hasMax: dp.HasMax(),
				bounds: appendFloats(c.scratchBounds[:0], dp.ExplicitBounds()),
				counts: appendCounts(c.scratchCounts[:0], dp.BucketCounts()),
			}
			c.scratchBounds, c.scratchCounts = p.bounds, p.counts
			s, out, reason, moved := c.step(ctx, key, &p, now, histogramSeries, cv)
			cv.record(key, p.ts, out, moved)
			switch out {
			case drop:
				c.dropped(cv, reason, m.Name())
				return true
			case emitDelta:
				prev := &s.prev
				dp.SetStartTimestamp(prev.ts)
				dp.SetCount(p.count - prev.count)
				if dp.HasSum() {
					dp.SetSum(p.sum - prev.sum)
				}
				deltas := dp.BucketCounts()
				for i := 0; i < deltas.Len(); i++ {
					deltas.SetAt(i, p.counts[i]-prev.counts[i])
				}
				setDeltaMinMax(&p, prev, dp.SetMin, dp.RemoveMin, dp.SetMax, dp.RemoveMax)
			}
			return false
		})
		h.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)

	case pmetric.MetricTypeExponentialHistogram:
		h := m.ExponentialHistogram()
		if h.AggregationTemporality() != pmetric.AggregationTemporalityCumulative {
			return
		}
		h.DataPoints().RemoveIf(func(dp pmetric.ExponentialHistogramDataPoint) bool {
			if dp.Flags().NoRecordedValue() {
				return true
			}
			key := mix(base, hashMap(dp.Attributes()))
			p := snapshot{
				start: dp.StartTimestamp(), ts: dp.Timestamp(),
				count: dp.Count(), sum: dp.Sum(),
				min: dp.Min(), hasMin: dp.HasMin(), max: dp.Max(), hasMax: dp.HasMax(),
				scale: dp.Scale(), zeroCount: dp.ZeroCount(),
				posOffset: dp.Positive().Offset(), counts: appendCounts(c.scratchCounts[:0], dp.Positive().BucketCounts()),
				negOffset: dp.Negative().Offset(), neg: appendCounts(c.scratchNeg[:0], dp.Negative().BucketCounts()),
			}
			c.scratchCounts, c.scratchNeg = p.counts, p.neg
			s, out, reason, moved := c.step(ctx, key, &p, now, exponentialSeries, cv)
			cv.record(key, p.ts, out, moved)
			switch out {
			case drop:
				c.dropped(cv, reason, m.Name())
				return true
			case emitDelta:
				prev := &s.prev
				d := exponentialDelta(&p, prev)
				dp.SetStartTimestamp(prev.ts)
				dp.SetCount(p.count - prev.count)
				if dp.HasSum() {
					dp.SetSum(p.sum - prev.sum)
				}
				dp.SetScale(d.scale)
				dp.SetZeroCount(d.zeroCount)
				dp.Positive().SetOffset(d.posOffset)
				dp.Positive().BucketCounts().FromRaw(d.counts)
				dp.Negative().SetOffset(d.negOffset)
				dp.Negative().BucketCounts().FromRaw(d.neg)
				setDeltaMinMax(&p, prev, dp.SetMin, dp.RemoveMin, dp.SetMax, dp.RemoveMax)
			}
			return false
		})
		h.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)

	case pmetric.MetricTypeSummary:
		c.convertSummary(ctx, m, base, now, cv)
	}
}

// convertSummary replaces a summary (always cumulative) by a delta histogram
// without buckets, which is sent as a CloudWatch StatisticSet. The 0 and 1
// quantiles, when present, become min and max.
func (c *Tracker) convertSummary(ctx context.Context, m pmetric.Metric, base uint64, now time.Time, cv *Result) {
	src := pmetric.NewSummaryDataPointSlice()
	m.Summary().DataPoints().MoveAndAppendTo(src)
	dst := m.SetEmptyHistogram()
	dst.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	for i := 0; i < src.Len(); i++ {
		sp := src.At(i)
		if sp.Flags().NoRecordedValue() {
			continue
		}
		key := mix(base, hashMap(sp.Attributes()))
		p := snapshot{start: sp.StartTimestamp(), ts: sp.Timestamp(), count: sp.Count(), sum: sp.Sum()}
		s, out, reason, moved := c.step(ctx, key, &p, now, summarySeries, cv)
		cv.record(key, p.ts, out, moved)
		if out == drop {
			c.dropped(cv, reason, m.Name())
			continue
		}
		hp := dst.DataPoints().AppendEmpty()
		sp.Attributes().CopyTo(hp.Attributes())
		hp.SetStartTimestamp(p.start)
		hp.SetTimestamp(p.ts)
		hp.SetCount(p.count)
		hp.SetSum(p.sum)
		if out == emitDelta {
			hp.SetStartTimestamp(s.prev.ts)
			hp.SetCount(p.count - s.prev.count)
			hp.SetSum(p.sum - s.prev.sum)
		}
		if hp.Count() > 0 {
			mean := hp.Sum() / float64(hp.Count())
			qs := sp.QuantileValues()
			for j := 0; j < qs.Len(); j++ {
				switch q := qs.At(j); q.Quantile() {
				case 0:
					hp.SetMin(math.Min(q.Value(), mean))
				case 1:
					hp.SetMax(math.Max(q.Value(), mean))
				}
			}
		}
	}
}

// setDeltaMinMax sets the min and max of a delta converted from cumulative
// points. The cumulative min/max cover the series' whole life; they are the
// interval's only when they changed in it (a new lowest or highest value was
// observed), otherwise the interval's min/max are unknown and left out.
func setDeltaMinMax(p, prev *snapshot, setMin func(float64), removeMin func(), setMax func(float64), removeMax func()) {
	if p.hasMin && prev.hasMin && p.min < prev.min {
		setMin(p.min)
	} else {
		removeMin()
	}
	if p.hasMax && prev.hasMax && p.max > prev.max {
		setMax(p.max)
	} else {
		removeMax()
	}
}

// step moves the series to point p and says how p is to be sent, and
// whether the series moved on (its state changed). p's slices may be scratch
// space: the series keeps copies.
func (c *Tracker) step(ctx context.Context, key uint64, p *snapshot, now time.Time, kind seriesKind, cv *Result) (*series, outcome, Reason, bool) {
	s := c.series[key]
	if s == nil && c.store != nil {
		s = c.restore(ctx, key, now, kind, cv)
	}
	if c.cfg.FutureTolerance > 0 && p.ts.AsTime().After(now.Add(c.cfg.FutureTolerance)) {
		// Neither a baseline nor a last value: the series goes on with its
		// next good point as if this one never came.
		return s, drop, ReasonFuture, false
	}
	if s == nil {
		s = c.insert(key, now, kind, cv)
		s.cur.copyFrom(p)
		s.curSent = p.start != 0 && p.start <= p.ts && p.start > c.watermark
		if s.curSent && c.cfg.MaxAge > 0 && p.start.AsTime().Before(now.Add(-c.cfg.MaxAge)) {
			// Counting a long history into one interval would mislead more
			// than starting the series here.
			s.curSent = false
			return s, drop, ReasonStartTooOld, true
		}
		if s.curSent {
			return s, emitAsIs, 0, true
		}
		return s, drop, ReasonBaseline, true
	}
	s.seen = now
	c.lru.moveToFront(s)

	switch {
	case s.unknown:
		// Saved but unreadable: it may have been sent before, so p is a
		// baseline, as for a forgotten series.
		s.cur.copyFrom(p)
		s.kind, s.unknown, s.hasPrev, s.curSent = kind, false, false, false
		return s, drop, ReasonBaseline, true
	case p.ts == s.cur.ts && p.start == s.cur.start:
		// The same point again (a client re-sent it): the same answer again.
		if s.hasPrev {
			out, reason := c.compare(p, &s.prev, kind)
			return s, out, reason, false
		}
		if s.curSent {
			return s, emitAsIs, 0, false
		}
		return s, drop, ReasonDuplicate, false
	case p.ts <= s.cur.ts:
		return s, drop, ReasonOutOfOrder, false
	}

	// p is newer: it becomes cur (in prev's old buffers), cur becomes prev.
	s.prev, s.cur = s.cur, s.prev
	s.cur.copyFrom(p)
	s.hasPrev, s.curSent = true, false
	out, reason := c.compare(p, &s.prev, kind)
	if out == drop {
		s.hasPrev = false // p is the new baseline
	}
	return s, out, reason, true
}

func (c *Tracker) compare(p, prev *snapshot, kind seriesKind) (outcome, Reason) {
	switch {
	case p.start != 0 && p.start != prev.start:
		return emitAsIs, 0 // restarted: p is the delta since its new start
	case kind.layoutChanged(p, prev):
		return drop, ReasonBucketLayoutChanged
	case kind.fell(p, prev):
		return emitAsIs, 0 // reset without a new start time: p counts since the reset
	}
	return emitDelta, 0
}

// undo takes back the conversion of points the queue refused, so that the
// next point's delta covers them again. A series that moved on since is left
// alone, and so are baselines: they were not sent.
func (c *Tracker) Undo(records []Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range records {
		s := c.series[r.key]
		if !r.sent || s == nil || s.cur.ts != r.ts {
			continue
		}
		if !s.hasPrev {
			// A first point: forget the series so that it is first again.
			c.remove(s)
			continue
		}
		s.cur, s.prev = s.prev, s.cur
		s.hasPrev, s.curSent = false, false
	}
}

// undoPoints is undo for the points of md (a subset handed back by a failed export).
func (c *Tracker) UndoMetrics(md pmetric.Metrics) {
	var records []Record
	rms := md.ResourceMetrics()
	for ri := 0; ri < rms.Len(); ri++ {
		rm := rms.At(ri)
		resHash := hashMap(rm.Resource().Attributes())
		sms := rm.ScopeMetrics()
		for si := 0; si < sms.Len(); si++ {
			sm := sms.At(si)
			scopeHash := hashStrings(sm.Scope().Name(), sm.Scope().Version())
			ms := sm.Metrics()
			for mi := 0; mi < ms.Len(); mi++ {
				m := ms.At(mi)
				base := metricHash(resHash, scopeHash, m)
				add := func(attrs pcommon.Map, ts pcommon.Timestamp) {
					records = append(records, Record{key: mix(base, hashMap(attrs)), ts: ts, sent: true})
				}
				switch m.Type() {
				case pmetric.MetricTypeSum:
					for _, dp := range m.Sum().DataPoints().All() {
						add(dp.Attributes(), dp.Timestamp())
					}
				case pmetric.MetricTypeHistogram:
					// A delta histogram here was a histogram or a summary
					// (convertSummary): its series is under either key.
					summaryBase := mix(resHash, scopeHash, hashStrings(m.Name(), ""), uint64(pmetric.MetricTypeSummary))
					for _, dp := range m.Histogram().DataPoints().All() {
						add(dp.Attributes(), dp.Timestamp())
						records = append(records, Record{key: mix(summaryBase, hashMap(dp.Attributes())), ts: dp.Timestamp(), sent: true})
					}
				case pmetric.MetricTypeExponentialHistogram:
					for _, dp := range m.ExponentialHistogram().DataPoints().All() {
						add(dp.Attributes(), dp.Timestamp())
					}
				}
			}
		}
	}
	c.Undo(records)
}

// seriesCount is the number of series remembered.
func (c *Tracker) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.series)
}

// insert adds a series seen at seen, as the most recently seen one.
func (c *Tracker) insert(key uint64, seen time.Time, kind seriesKind, cv *Result) *series {
	for len(c.series) >= c.cfg.MaxSeries {
		c.evict(c.lru.oldest, cv)
		c.evicted(seen)
	}
	s := &series{key: key, seen: seen, kind: kind}
	c.series[key] = s
	c.lru.pushFront(s)
	return s
}

// expire forgets the series not seen for longer than the TTL.
func (c *Tracker) expire(now time.Time, cv *Result) {
	limit := now.Add(-c.cfg.TTL)
	for s := c.lru.oldest; s != nil && s.seen.Before(limit); s = c.lru.oldest {
		c.evict(s, cv)
	}
}

// evict forgets s to stay within the bounds. Its newest point raises the
// watermark: a point of it cannot be told from a new series' any more.
func (c *Tracker) evict(s *series, cv *Result) {
	c.forgetUpTo(s.cur.ts)
	cv.Evictions++
	c.remove(s)
	if c.store != nil && s.storeKey != "" {
		c.store.deletes = append(c.store.deletes, s.storeKey)
	}
}

// forgetUpTo raises the watermark to ts.
func (c *Tracker) forgetUpTo(ts pcommon.Timestamp) {
	if ts > c.watermark {
		c.watermark = ts
		if c.store != nil {
			c.store.watermarkChanged = true
		}
	}
}

func (c *Tracker) remove(s *series) {
	delete(c.series, s.key)
	c.lru.unlink(s)
}

// copyFrom makes s a copy of p, reusing s's buffers.
func (s *snapshot) copyFrom(p *snapshot) {
	bounds, counts, neg := s.bounds, s.counts, s.neg
	*s = *p
	s.bounds = append(bounds[:0], p.bounds...)
	s.counts = append(counts[:0], p.counts...)
	s.neg = append(neg[:0], p.neg...)
}

func appendFloats(dst []float64, src pcommon.Float64Slice) []float64 {
	for i := 0; i < src.Len(); i++ {
		dst = append(dst, src.At(i))
	}
	return dst
}

func appendCounts(dst []uint64, src pcommon.UInt64Slice) []uint64 {
	for i := 0; i < src.Len(); i++ {
		dst = append(dst, src.At(i))
	}
	return dst
}

func sumFell(p, prev *snapshot) bool {
	if p.isInt != prev.isInt {
		return true
	}
	if p.isInt {
		return p.intValue < prev.intValue
	}
	return p.value < prev.value
}

func histogramFell(p, prev *snapshot) bool {
	if p.count < prev.count {
		return true
	}
	for i := range min(len(p.counts), len(prev.counts)) {
		if p.counts[i] < prev.counts[i] {
			return true
		}
	}
	return false
}

func explicitLayoutChanged(p, prev *snapshot) bool {
	return !slices.Equal(p.bounds, prev.bounds) || len(p.counts) != len(prev.counts)
}

// exponentialFell reports whether any bucket of p (at the coarser of the two
// scales) holds fewer observations than the same bucket of prev.
func exponentialFell(p, prev *snapshot) bool {
	if p.count < prev.count || p.zeroCount < prev.zeroCount {
		return true
	}
	scale := min(p.scale, prev.scale)
	return bucketsFell(p.posOffset, p.counts, p.scale, prev.posOffset, prev.counts, prev.scale, scale) ||
		bucketsFell(p.negOffset, p.neg, p.scale, prev.negOffset, prev.neg, prev.scale, scale)
}

func bucketsFell(off int32, counts []uint64, scale int32, prevOff int32, prevCounts []uint64, prevScale int32, to int32) bool {
	o, c := downscale(off, counts, scale-to)
	po, pc := downscale(prevOff, prevCounts, prevScale-to)
	for i, v := range pc {
		j := int(po) + i - int(o)
		if v > 0 && (j < 0 || j >= len(c) || c[j] < v) {
			return true
		}
	}
	return false
}

// exponentialDelta is p minus prev at the coarser of their scales; p must
// not have fallen below prev.
func exponentialDelta(p, prev *snapshot) snapshot {
	scale := min(p.scale, prev.scale)
	d := snapshot{scale: scale, zeroCount: p.zeroCount - prev.zeroCount}
	d.posOffset, d.counts = subtractBuckets(p.posOffset, p.counts, p.scale, prev.posOffset, prev.counts, prev.scale, scale)
	d.negOffset, d.neg = subtractBuckets(p.negOffset, p.neg, p.scale, prev.negOffset, prev.neg, prev.scale, scale)
	return d
}

func subtractBuckets(off int32, counts []uint64, scale int32, prevOff int32, prevCounts []uint64, prevScale int32, to int32) (int32, []uint64) {
	o, c := downscale(off, counts, scale-to)
	c = slices.Clone(c)
	po, pc := downscale(prevOff, prevCounts, prevScale-to)
	for i, v := range pc {
		if j := int(po) + i - int(o); j >= 0 && j < len(c) {
			c[j] -= v
		}
	}
	return o, c
}

// downscale merges exponential buckets to a scale lower by by (each step
// halves the resolution: bucket i goes to i>>1).
func downscale(offset int32, counts []uint64, by int32) (int32, []uint64) {
	if by <= 0 || len(counts) == 0 {
		return offset, counts
	}
	first := offset >> by
	last := (offset + int32(len(counts)) - 1) >> by
	out := make([]uint64, last-first+1)
	for i, v := range counts {
		out[((offset+int32(i))>>by)-first] += v
	}
	return first, out
}

// hashMap hashes attributes independently of their order.
//
// Series keys are saved with cumulative_state.storage, so these hashes must
// not change between versions (or processes): xxhash64 of the strings, no
// random seed.
func hashMap(m pcommon.Map) uint64 {
	var sum uint64
	for k, v := range m.All() {
		sum += mix(xxhash.Sum64String(k), hashValue(v))
	}
	return sum
}

func hashValue(v pcommon.Value) uint64 {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return xxhash.Sum64String(v.Str())
	case pcommon.ValueTypeInt:
		return mix(uint64(v.Int()), 1)
	case pcommon.ValueTypeDouble:
		return mix(math.Float64bits(v.Double()), 2)
	case pcommon.ValueTypeBool:
		if v.Bool() {
			return mix(1, 3)
		}
		return mix(0, 3)
	default:
		return xxhash.Sum64String(v.AsString())
	}
}

func hashStrings(a, b string) uint64 {
	return mix(xxhash.Sum64String(a), xxhash.Sum64String(b))
}

// mix combines hashes, order-dependently (splitmix64 finalizer per step).
func mix(hs ...uint64) uint64 {
	var h uint64 = 0x9e3779b97f4a7c15
	for _, v := range hs {
		h ^= v + 0x9e3779b97f4a7c15 + (h << 6) + (h >> 2)
		h ^= h >> 30
		h *= 0xbf58476d1ce4e5b9
		h ^= h >> 27
		h *= 0x94d049bb133111eb
		h ^= h >> 31
	}
	return h
}

// seriesList is an intrusive doubly linked list, most recently seen first.
type seriesList struct {
	newest, oldest *series
}

func (l *seriesList) pushFront(s *series) {
	s.older, s.newer = l.newest, nil
	if l.newest != nil {
		l.newest.newer = s
	}
	l.newest = s
	if l.oldest == nil {
		l.oldest = s
	}
}

func (l *seriesList) unlink(s *series) {
	if s.newer != nil {
		s.newer.older = s.older
	} else {
		l.newest = s.older
	}
	if s.older != nil {
		s.older.newer = s.newer
	} else {
		l.oldest = s.newer
	}
	s.newer, s.older = nil, nil
}

func (l *seriesList) moveToFront(s *series) {
	if l.newest == s {
		return
	}
	l.unlink(s)
	l.pushFront(s)
}
