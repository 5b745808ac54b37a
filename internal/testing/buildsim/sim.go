// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package buildsim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otellog "go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/metric"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Names and units of the service's SDK instruments.
const (
	CounterName      = "buildsvc.vectors.indexed"
	CounterUnit      = "{vector}"
	HistogramName    = "buildsvc.index.size"
	HistogramUnit    = "By"
	GaugeName        = "buildsvc.gpu.utilization"
	GaugeUnit        = "%"
	HTTPDurationName = "http.server.request.duration"
	HTTPDurationUnit = "s"
	scopeName        = "github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
)

// GaugeValues are the only values the GPU-utilization gauge reports; a test
// can check every landed point against them.
var gaugeValues = [...]float64{25, 37.5, 50, 62.5, 75}

// GaugeValues returns the values the GPU-utilization gauge can report.
func GaugeValues() []float64 { return slices.Clone(gaugeValues[:]) }

// Option changes how Run works (mainly for tests).
type Option func(*runOptions)

type runOptions struct {
	factory ExporterFactory
	now     func() time.Time
	logf    func(format string, args ...any)
}

// WithExporterFactory replaces the OTLP exporters (tests use in-memory ones).
func WithExporterFactory(f ExporterFactory) Option { return func(o *runOptions) { o.factory = f } }

// WithLogf reports progress (restarts, failed exports) through logf.
func WithLogf(logf func(format string, args ...any)) Option {
	return func(o *runOptions) { o.logf = logf }
}

// Run emits cfg.Jobs build runs at cfg.Rate and returns the ground truth.
// The error is non-nil when the run could not finish (context cancelled,
// exporters not created, or StopOnExportError and an export failed); the
// summary then covers what happened until then.
func Run(ctx context.Context, cfg Config, opts ...Option) (*Summary, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o := runOptions{factory: OTLPExporters, now: time.Now, logf: func(string, ...any) {}}
	for _, opt := range opts {
		opt(&o)
	}
	r := &runner{cfg: cfg, opts: o, plan: newPlanner(cfg), generated: newTruthBuilder(), acked: newTruthBuilder()}
	r.sdk = SDKMetrics{
		Counter:   CounterTruth{Name: CounterName, Unit: CounterUnit},
		Histogram: HistogramTruth{Name: HistogramName, Unit: HistogramUnit},
		Gauge:     GaugeTruth{Name: GaugeName, Unit: GaugeUnit, Allowed: GaugeValues()},
	}
	if cfg.APIMetrics {
		r.sdk.HTTPServerDuration = HistogramTruth{Name: HTTPDurationName, Unit: HTTPDurationUnit}
	}
	err := r.run(ctx)
	return r.summary(), err
}

type runner struct {
	cfg  Config
	opts runOptions
	plan *planner

	mu        sync.Mutex // guards what exporters' callbacks update
	generated *truthBuilder
	acked     *truthBuilder
	exports   ExportStats
	sdk       SDKMetrics

	counterSeries, histSeries map[string]struct{}
	emitted                   int
	restarts                  int
	start, end                time.Time
}

func (r *runner) summary() *Summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &Summary{
		Protocol: r.cfg.Protocol, Endpoint: r.cfg.Endpoint, Seed: r.cfg.Seed, Service: r.cfg.ServiceName,
		Generated: r.generated.totals(), Acknowledged: r.acked.totals(),
		SDKMetrics: r.sdk, Exports: r.exports, JobsEmitted: r.emitted, Restarts: r.restarts,
		Start: r.start, End: r.end, Elapsed: r.end.Sub(r.start).Seconds(),
	}
	if !r.cfg.Metrics {
		s.SDKMetrics = SDKMetrics{}
	}
	// Without API spans the API calls reach the collector only through the
	// histogram, which is cumulative: all of them arrived if the last
	// metric export of each incarnation did.
	if !r.cfg.APISpans && r.cfg.Metrics && r.cfg.APIMetrics && r.exports.MetricFinalExportsFailed == 0 {
		s.Acknowledged.APIRequests = s.Generated.APIRequests
	}
	s.SDKMetrics.Counter.Series = len(r.counterSeries)
	s.SDKMetrics.Histogram.Series = len(r.histSeries)
	if r.cfg.Metrics {
		s.SDKMetrics.Gauge.Series = r.cfg.GPUs + r.cfg.MetricSeries
	}
	return s
}

func (r *runner) run(ctx context.Context) (err error) {
	r.start = r.opts.now()
	r.counterSeries, r.histSeries = map[string]struct{}{}, map[string]struct{}{}
	inc, err := r.startIncarnation(ctx)
	if err != nil {
		r.end = r.opts.now()
		return err
	}
	defer func() {
		// A fresh context: the final flush must run even when ctx ended.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.ExportTimeout+r.cfg.RetryMaxElapsed+5*time.Second)
		defer cancel()
		inc.finishAll(sctx)
		err = errors.Join(err, inc.shutdown(sctx))
		r.end = r.opts.now()
	}()

	// Without a rate limit, bound the jobs per round so batches stay near
	// MaxBatch spans.
	perRound := max(1, r.cfg.MaxBatch/(2+len(r.cfg.StageMeans)+r.cfg.StatusPolls+1))
	ticker := time.NewTicker(r.cfg.Tick)
	defer ticker.Stop()
	for {
		var due int
		if r.cfg.Rate > 0 {
			due = min(r.cfg.Jobs, int(math.Floor(r.cfg.Rate*r.opts.now().Sub(r.start).Seconds())))
		} else {
			due = min(r.cfg.Jobs, r.emitted+perRound)
		}
		for r.emitted < due {
			if r.cfg.RestartAfter > 0 && r.emitted == r.cfg.RestartAfter && r.restarts == 0 {
				if inc, err = r.restart(ctx, inc); err != nil {
					return err
				}
			}
			inc.startJob(ctx, r.plan.next(r.emitted))
			r.emitted++
		}
		inc.finishDue(r.opts.now())
		inc.touchLoadSeries(ctx)
		if err := inc.flush(ctx); err != nil && r.cfg.StopOnExportError {
			return err
		}
		if r.emitted >= r.cfg.Jobs && len(inc.pending) == 0 {
			return nil
		}
		if r.cfg.Rate > 0 || r.emitted >= r.cfg.Jobs {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-ticker.C:
			}
		} else if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// restart shuts the current incarnation down (flushing it) and starts a new
// one, as a redeployed service process would.
func (r *runner) restart(ctx context.Context, inc *incarnation) (*incarnation, error) {
	inc.finishAll(ctx) // the old process's runs end before it exits
	if err := inc.shutdown(ctx); err != nil {
		r.opts.logf("buildsim: shutdown before restart: %v", err)
		if r.cfg.StopOnExportError {
			return inc, err
		}
	}
	r.restarts++
	r.opts.logf("buildsim: restarted the service's SDK after %d jobs", r.emitted)
	return r.startIncarnation(ctx)
}

// incarnation is one process lifetime of the service: its providers, buffers
// and instruments.
type incarnation struct {
	r       *runner
	ex      Exporters
	tp      *sdktrace.TracerProvider
	lp      *sdklog.LoggerProvider
	mp      *sdkmetric.MeterProvider
	spans   *spanBuffer
	logs    *logBuffer
	tracer  trace.Tracer
	logger  otellog.Logger
	counter metric.Int64Counter
	hist    metric.Float64Histogram
	httpDur metric.Float64Histogram
	gauge   metric.Float64ObservableGauge
	polls   int // gauge callbacks so far
	// pending are started runs whose end is sent StartLead later.
	pending   []pendingJob
	metricExp *countingMetricExporter
}

func (r *runner) startIncarnation(ctx context.Context) (*incarnation, error) {
	ex, err := r.opts.factory(ctx, r.cfg)
	if err != nil {
		return nil, fmt.Errorf("creating exporters: %w", err)
	}
	resAttrs := []attribute.KeyValue{
		attribute.String("service.name", r.cfg.ServiceName),
		attribute.String("service.instance.id", r.cfg.InstanceID),
		attribute.String("service.version", "1.0.0"),
	}
	if r.cfg.ProcessPID > 0 {
		resAttrs = append(resAttrs, attribute.Int(AttrProcessPID, r.cfg.ProcessPID))
	}
	res := resource.NewWithAttributes("", resAttrs...)
	inc := &incarnation{r: r, ex: ex, spans: &spanBuffer{}, logs: &logBuffer{}}
	inc.tp = sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSpanProcessor(inc.spans), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	inc.lp = sdklog.NewLoggerProvider(sdklog.WithResource(res), sdklog.WithProcessor(inc.logs))
	inc.tracer = inc.tp.Tracer(scopeName)
	inc.logger = inc.lp.Logger(scopeName)
	if r.cfg.Metrics {
		inc.metricExp = &countingMetricExporter{Exporter: ex.Metric, r: r}
		reader := sdkmetric.NewPeriodicReader(inc.metricExp,
			sdkmetric.WithInterval(r.cfg.MetricInterval), sdkmetric.WithTimeout(r.cfg.ExportTimeout+r.cfg.RetryMaxElapsed),
			sdkmetric.WithMaxExportBatchSize(r.cfg.MetricMaxBatch))
		inc.mp = sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(reader), sdkmetric.WithCardinalityLimit(0))
		m := inc.mp.Meter(scopeName)
		if inc.counter, err = m.Int64Counter(CounterName, metric.WithUnit(CounterUnit), metric.WithDescription("Vectors indexed by successful builds.")); err != nil {
			return nil, err
		}
		if inc.hist, err = m.Float64Histogram(HistogramName, metric.WithUnit(HistogramUnit), metric.WithDescription("Size of the built index.")); err != nil {
			return nil, err
		}
		// The bounds OpenTelemetry's HTTP semantic conventions advise.
		if inc.httpDur, err = m.Float64Histogram(HTTPDurationName, metric.WithUnit(HTTPDurationUnit),
			metric.WithDescription("Duration of HTTP server requests."),
			metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10)); err != nil {
			return nil, err
		}
		if inc.gauge, err = m.Float64ObservableGauge(GaugeName, metric.WithUnit(GaugeUnit), metric.WithDescription("GPU utilization seen by the service.")); err != nil {
			return nil, err
		}
		if _, err = m.RegisterCallback(inc.observeGauge, inc.gauge); err != nil {
			return nil, err
		}
	}
	return inc, nil
}

func (inc *incarnation) observeGauge(_ context.Context, o metric.Observer) error {
	g := inc.r.cfg
	for i := 0; i < g.GPUs; i++ {
		o.ObserveFloat64(inc.gauge, gaugeValues[(inc.polls+i)%len(gaugeValues)], metric.WithAttributes(attribute.Int(AttrGPUIndex, i)))
	}
	for i := 0; i < g.MetricSeries; i++ {
		o.ObserveFloat64(inc.gauge, gaugeValues[i%len(gaugeValues)], metric.WithAttributes(attribute.Int(AttrMetricSeries, i)))
	}
	inc.polls++
	return nil
}

func (r *runner) recordHist(v float64, series string) {
	addHist(&r.sdk.Histogram, v)
	r.histSeries[series] = struct{}{}
}

func addHist(h *HistogramTruth, v float64) {
	if h.Count == 0 || v < h.Min {
		h.Min = v
	}
	if h.Count == 0 || v > h.Max {
		h.Max = v
	}
	h.Count++
	h.Sum += v
}

// touchLoadSeries updates the extra load series once per tick.
func (inc *incarnation) touchLoadSeries(ctx context.Context) {
	n := inc.r.cfg.MetricSeries
	if n == 0 || !inc.r.cfg.Metrics {
		return
	}
	for i := 0; i < n; i++ {
		opt := metric.WithAttributes(attribute.Int(AttrMetricSeries, i))
		inc.counter.Add(ctx, 1, opt)
		inc.hist.Record(ctx, 1, opt)
	}
	r := inc.r
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sdk.Counter.Total += int64(n)
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("series|%d", i)
		r.counterSeries[key] = struct{}{}
		r.recordHist(1, key)
	}
}

// shutdown flushes what is buffered, then shuts the providers down: the
// meter provider's shutdown makes the final cumulative export.
func (inc *incarnation) shutdown(ctx context.Context) error {
	errs := []error{inc.flush(ctx)}
	errs = append(errs, inc.tp.Shutdown(ctx), inc.lp.Shutdown(ctx))
	if inc.mp != nil {
		errs = append(errs, inc.mp.Shutdown(ctx))
		inc.r.mu.Lock()
		if inc.metricExp.latestFailed {
			inc.r.exports.MetricFinalExportsFailed++
		}
		inc.r.mu.Unlock()
	}
	errs = append(errs, inc.ex.Span.Shutdown(ctx), inc.ex.Log.Shutdown(ctx))
	return errors.Join(errs...)
}
