// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package buildsim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDurationQuantumIsExactInSeconds(t *testing.T) {
	assert.Equal(t, time.Duration(1953125), DurationQuantum)
	// k quanta in seconds is k/512 exactly, and sums stay exact.
	var sum float64
	for k := 1; k <= 10000; k++ {
		s := (time.Duration(k) * DurationQuantum).Seconds()
		require.Equal(t, float64(k)/512, s)
		sum += s
	}
	assert.Equal(t, float64(10000*10001/2)/512, sum)
}

func TestPlannerPlans(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FailureRatio, cfg.CancelRatio = 0.3, 0.1
	cfg.API4xxRatio, cfg.API5xxRatio = 0.2, 0.1
	p := newPlanner(cfg)
	ids := map[string]bool{}
	results := map[string]int{}
	for i := range 2000 {
		j := p.next(i)
		require.False(t, ids[j.ID], "job ids are unique")
		ids[j.ID] = true
		results[j.Result]++
		if j.Result == ResultCancellation {
			assert.True(t, j.ResultAttr, "a cancellation must carry build.job.result")
		}

		// Stages run in the configured order, back to back, after the wait.
		require.NotEmpty(t, j.Stages)
		require.LessOrEqual(t, len(j.Stages), len(cfg.StageMeans))
		end := j.Stages[0].Offset
		assert.Positive(t, end, "queue wait")
		for k, st := range j.Stages {
			assert.Equal(t, cfg.StageMeans[k].Stage, st.Stage)
			assert.Equal(t, end, st.Offset)
			assert.Zero(t, st.Duration%DurationQuantum)
			assert.LessOrEqual(t, st.Duration, cfg.StageMax)
			assert.GreaterOrEqual(t, st.Duration, DurationQuantum)
			end += st.Duration
			if k < len(j.Stages)-1 {
				assert.Equal(t, ResultSuccess, st.Result, "only the last stage run can fail")
			}
		}
		assert.Equal(t, end, j.Duration)
		last := j.Stages[len(j.Stages)-1]
		assert.Equal(t, j.Result, last.Result, "the last stage ends the job the same way")
		if j.Result == ResultSuccess {
			assert.Len(t, j.Stages, len(cfg.StageMeans))
		}

		// One accepted POST, after at most two refused ones, ending at the
		// job's start; then the polls within the job.
		var posts, accepted int
		for _, c := range j.API {
			assert.Zero(t, c.Duration%DurationQuantum)
			if c.Route == RouteBuild {
				posts++
				assert.LessOrEqual(t, c.Offset+c.Duration, time.Duration(0))
				if c.Status/100 == 2 {
					accepted++
				}
			} else {
				assert.Equal(t, "/_status/"+j.ID, c.Path)
				assert.GreaterOrEqual(t, c.Offset, time.Duration(0))
				assert.Less(t, c.Offset, j.Duration)
			}
		}
		assert.Equal(t, 1, accepted)
		assert.LessOrEqual(t, posts, 3)
		assert.Len(t, j.API, posts+cfg.StatusPolls)
	}
	// The ratios hold roughly over 2000 draws.
	assert.InDelta(t, 0.3, float64(results[ResultFailure])/2000, 0.05)
	assert.InDelta(t, 0.1, float64(results[ResultCancellation])/2000, 0.03)
}

func TestJobSeenCounted(t *testing.T) {
	d := 3 * time.Second
	for _, tc := range []struct {
		name      string
		seen      jobSeen
		counted   bool
		knownTime bool
	}{
		{"span only", jobSeen{span: true}, true, true},
		{"both records", jobSeen{startLog: true, endLog: true}, true, true},
		{"everything", jobSeen{span: true, startLog: true, endLog: true}, true, true},
		{"end record only", jobSeen{endLog: true}, true, false},
		{"start record only", jobSeen{startLog: true}, false, false},
		{"nothing", jobSeen{}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.seen.duration = d
			ok, got := tc.seen.counted()
			assert.Equal(t, tc.counted, ok)
			if tc.knownTime {
				assert.Equal(t, d, got)
			} else {
				assert.Negative(t, got)
			}
		})
	}
}

func TestMatch(t *testing.T) {
	tl := tally{}
	tl.add(jobAttrs(ResultSuccess, "cagra", "float32"), 2*time.Second)
	tl.add(jobAttrs(ResultSuccess, "cagra", "float16"), 4*time.Second)
	tl.add(jobAttrs(ResultFailure, "cagra", "float16"), time.Second)
	tl.add(jobAttrs(ResultFailure, "cagra", "float16"), -1)
	all := tl.sorted()
	s := Match(all, map[string]string{AttrResult: ResultSuccess})
	assert.Equal(t, Stat{Count: 2, Sum: 6, Min: 2, Max: 4}, s.Duration)
	f := Match(all, map[string]string{AttrResult: ResultFailure})
	assert.EqualValues(t, 2, f.Count)
	assert.Equal(t, Stat{Count: 1, Sum: 1, Min: 1, Max: 1}, f.Duration)
	assert.EqualValues(t, 4, Match(all, nil).Count)
}

func TestConfigValidate(t *testing.T) {
	require.NoError(t, DefaultConfig().Validate())
	for _, tc := range []struct {
		field string
		edit  func(*Config)
	}{
		{"protocol", func(c *Config) { c.Protocol = "udp" }},
		{"endpoint", func(c *Config) { c.Endpoint = "" }},
		{"failure_ratio", func(c *Config) { c.FailureRatio = 1.5 }},
		{"failure_ratio", func(c *Config) { c.FailureRatio, c.CancelRatio = 0.6, 0.6 }},
		{"api_5xx_ratio", func(c *Config) { c.API5xxRatio = -0.1 }},
		{"stages", func(c *Config) { c.StageMeans = nil }},
		{"tick", func(c *Config) { c.Tick = 0 }},
		{"max_batch", func(c *Config) { c.MaxBatch = 0 }},
		{"tenants", func(c *Config) { c.Tenants = 0 }},
		{"metric_interval", func(c *Config) { c.MetricInterval = 0 }},
	} {
		cfg := DefaultConfig()
		tc.edit(&cfg)
		err := cfg.Validate()
		require.Error(t, err, tc.field)
		assert.Contains(t, err.Error(), tc.field+":")
	}
}
