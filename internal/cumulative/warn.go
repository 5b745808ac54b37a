// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cumulative // import "github.com/gpubuild/otelcol-gpubuild/internal/cumulative"

import (
	"time"

	"go.uber.org/zap"
)

// warnInterval is how often one kind of warning is repeated for one metric.
const warnInterval = 10 * time.Minute

// maxWarnedNames bounds the limiter's memory; past it, it starts afresh.
const maxWarnedNames = 1024

type warnKey struct {
	reason Reason
	metric string
}

// warnLimiter remembers when a warning was last logged per reason and metric
// name, so that a misbehaving source is named without flooding the log.
type warnLimiter struct {
	last map[warnKey]time.Time
}

func (w *warnLimiter) allow(k warnKey, now time.Time) bool {
	if t, ok := w.last[k]; ok && now.Sub(t) < warnInterval {
		return false
	}
	if w.last == nil || len(w.last) >= maxWarnedNames {
		w.last = make(map[warnKey]time.Time)
	}
	w.last[k] = now
	return true
}

// dropped counts a point that gave no delta, and warns (rate-limited) for
// the reasons an operator should hear about. Called under c.mu.
func (c *Tracker) dropped(cv *Result, reason Reason, metric string) {
	cv.Dropped[reason]++
	now := time.Now()
	switch reason {
	case ReasonFuture:
		if c.warned.allow(warnKey{reason, metric}, now) {
			c.logger.Warn("Refused a cumulative point stamped in the future; its series goes on from its next point",
				zap.String("metric", metric), zap.Duration("tolerance", c.cfg.FutureTolerance))
		}
	case ReasonStartTooOld:
		if c.warned.allow(warnKey{reason, metric}, now) {
			c.logger.Info("First point of a series started longer ago than max_age: taken as a baseline, not counted from its start",
				zap.String("metric", metric), zap.Duration("max_age", c.cfg.MaxAge))
		}
	}
}

// evicted logs (rate-limited) that the series cap forced out a series.
func (c *Tracker) evicted(now time.Time) {
	if c.warned.allow(warnKey{NumReasons, ""}, now) {
		c.logger.Warn("Cumulative state is full: evicted a series (series seen only once first, then the least recently updated); raise max_series if this repeats",
			zap.Int("max_series", c.cfg.MaxSeries))
	}
}
