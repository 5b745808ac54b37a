// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package buildsim

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"time"
)

// DurationQuantum is the resolution of every simulated duration. 1/512 s is
// a whole number of nanoseconds and exactly representable in float64, so a
// duration converted to seconds, and any sum of such, is exact.
const DurationQuantum = time.Second / 512

// Job results, as the contract spells them (build.job.result, build.result).
const (
	ResultSuccess      = "success"
	ResultFailure      = "failure"
	ResultCancellation = "cancellation"
)

// Job status values of the build service (build.job.status on log records).
const (
	StatusRunning   = "RUNNING_INDEX_BUILD"
	StatusCompleted = "COMPLETED_INDEX_BUILD"
	StatusFailed    = "FAILED_INDEX_BUILD"
)

// API routes of the build service.
const (
	RouteBuild  = "/_build"
	RouteStatus = "/_status/{job_id}"
)

// JobPlan is everything about one build run, fixed before it is emitted.
type JobPlan struct {
	Index    int
	ID       string
	Tenant   string
	Engine   string
	DataType string
	// Duration is from the job's start (its creation) to its end.
	Duration time.Duration
	Result   string
	// ResultAttr: the result is also set as build.job.result. Otherwise a
	// consumer must take it from the span status (a cancellation always
	// carries the attribute: a status cannot say it).
	ResultAttr bool
	// ObservedTimeOnly: the job's status log records carry only an observed
	// timestamp, the contract's fallback for the event time.
	ObservedTimeOnly bool
	Stages           []StagePlan
	// Vectors and IndexBytes feed the SDK counter and histogram when the
	// job succeeds.
	Vectors    int64
	IndexBytes int64
	API        []APICall
}

// StagePlan is one stage run of a job. Offset is from the job's start.
type StagePlan struct {
	Stage      string
	Offset     time.Duration
	Duration   time.Duration
	Result     string
	ResultAttr bool
}

// APICall is one HTTP request to the service. Offset is from the job's start
// (negative for the POST /_build calls that created the job).
type APICall struct {
	Route    string
	Method   string
	Path     string
	Status   int
	Offset   time.Duration
	Duration time.Duration
}

// StatusClass is the http.response.status_class of a status code.
func StatusClass(code int) string { return fmt.Sprintf("%dxx", code/100) }

// planner draws job plans from a seeded generator; the n-th plan depends only
// on the seed, the configuration and n.
type planner struct {
	cfg Config
	rng *rand.Rand
}

func newPlanner(cfg Config) *planner {
	return &planner{cfg: cfg, rng: rand.New(rand.NewPCG(uint64(cfg.Seed), 0x6275696c6473696d))}
}

// duration draws a log-normal duration around mean (sigma 0.5), rounded to
// the quantum and kept within [quantum, limit].
func (p *planner) duration(mean, limit time.Duration) time.Duration {
	const sigma = 0.5
	x := float64(mean) * math.Exp(sigma*p.rng.NormFloat64()-sigma*sigma/2)
	q := time.Duration(math.Round(x/float64(DurationQuantum))) * DurationQuantum
	return min(max(q, DurationQuantum), limit)
}

func (p *planner) apiStatus(method string) int {
	u := p.rng.Float64()
	switch {
	case u < p.cfg.API5xxRatio:
		return []int{500, 502, 503}[p.rng.IntN(3)]
	case u < p.cfg.API5xxRatio+p.cfg.API4xxRatio:
		if method == "POST" {
			return []int{400, 409, 422, 429}[p.rng.IntN(4)]
		}
		return []int{400, 404, 429}[p.rng.IntN(3)]
	case method == "POST":
		return 202
	default:
		return 200
	}
}

func (p *planner) next(index int) JobPlan {
	cfg := p.cfg
	tenant := p.rng.IntN(cfg.Tenants)
	j := JobPlan{
		Index:            index,
		Tenant:           fmt.Sprintf("tenant-%03d", tenant),
		Engine:           cfg.Engines[p.rng.IntN(len(cfg.Engines))],
		DataType:         cfg.DataTypes[p.rng.IntN(len(cfg.DataTypes))],
		ObservedTimeOnly: index%4 == 3,
	}
	// The service derives the id from (vector path, tenant); the run index
	// and seed keep ids unique across runs of the simulator.
	h := fnv.New64a()
	fmt.Fprintf(h, "s3://vectors/%s/set-%07d|%s|%d", j.Tenant, index, j.Tenant, cfg.Seed) // (vector path, tenant, seed)
	j.ID = fmt.Sprintf("%016x", h.Sum64())

	u := p.rng.Float64()
	endAt := -1 // index of the stage that fails or is cancelled
	j.Result = ResultSuccess
	switch {
	case u < cfg.FailureRatio:
		j.Result = ResultFailure
		endAt = p.rng.IntN(len(cfg.StageMeans))
	case u < cfg.FailureRatio+cfg.CancelRatio:
		j.Result = ResultCancellation
		endAt = p.rng.IntN(len(cfg.StageMeans))
	}
	j.ResultAttr = j.Result == ResultCancellation || p.rng.IntN(2) == 0

	offset := p.duration(cfg.QueueWaitMean, cfg.StageMax)
	for i, sm := range cfg.StageMeans {
		s := StagePlan{Stage: sm.Stage, Offset: offset, Duration: p.duration(sm.Mean, cfg.StageMax), Result: ResultSuccess}
		if i == endAt {
			s.Result = j.Result
		}
		s.ResultAttr = s.Result == ResultCancellation || p.rng.IntN(2) == 0
		j.Stages = append(j.Stages, s)
		offset += s.Duration
		if i == endAt {
			break
		}
	}
	j.Duration = offset

	j.Vectors = 10_000 + p.rng.Int64N(990_000)
	bytesPerValue := int64(4)
	if j.DataType == "float16" {
		bytesPerValue = 2
	}
	j.IndexBytes = j.Vectors * 768 * bytesPerValue

	// POST /_build until one is accepted (at most three attempts), spaced
	// 250 ms apart, the accepted one returning at the job's start.
	var posts []APICall
	for attempt := 0; attempt < 3; attempt++ {
		c := APICall{Route: RouteBuild, Method: "POST", Path: RouteBuild, Status: p.apiStatus("POST"), Duration: p.duration(cfg.APILatencyMean, time.Minute)}
		if attempt == 2 && c.Status/100 != 2 {
			c.Status = 202
		}
		posts = append(posts, c)
		if c.Status/100 == 2 {
			break
		}
	}
	end := time.Duration(0)
	for i := len(posts) - 1; i >= 0; i-- {
		posts[i].Offset = end - posts[i].Duration
		end = posts[i].Offset - 250*time.Millisecond
	}
	j.API = append(j.API, posts...)
	for k := 1; k <= cfg.StatusPolls; k++ {
		at := j.Duration * time.Duration(k) / time.Duration(cfg.StatusPolls+1)
		at = at / DurationQuantum * DurationQuantum
		j.API = append(j.API, APICall{
			Route: RouteStatus, Method: "GET", Path: "/_status/" + j.ID,
			Status: p.apiStatus("GET"), Offset: at, Duration: p.duration(cfg.APILatencyMean, time.Minute),
		})
	}
	return j
}
