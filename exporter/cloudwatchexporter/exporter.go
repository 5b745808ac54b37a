package cloudwatchexporter // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter"

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/adaptiverate"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/metadata"
	"github.com/gpubuild/otelcol-gpubuild/internal/pmetricutil"
	"github.com/gpubuild/otelcol-gpubuild/internal/statejournal"
)

const (
	// throttleRetryDelay is the least time before a throttled request is retried.
	throttleRetryDelay = time.Second
)

// errAutoDryRun is the component status of an auto dry run: nothing reaches CloudWatch.
var errAutoDryRun = errors.New("dry run: no AWS region or credentials found, printing PutMetricData requests to stdout instead of sending them")

// cloudWatchExporter translates, packs and sends metrics; exporterhelper
// calls pushMetrics from the sending queue and retries what it hands back.
type cloudWatchExporter struct {
	id         component.ID
	cfg        *Config
	logger     *zap.Logger
	telemetry  *metadata.TelemetryBuilder
	translator *translator
	deltas     *deltaConverter
	series     *seriesLimiter // nil: max_series_per_metric 0
	slots      chan struct{}  // bounds the requests in flight, across concurrent exports
	pace       *adaptiverate.Limiter
	now        func() time.Time
	// throttleDelay is the least wait before a throttled request is retried.
	throttleDelay time.Duration

	// saveFailing: the last save of the cumulative state failed.
	saveFailing atomic.Bool

	// set by start
	putter   putter
	dryRun   atomic.Bool
	file     *os.File
	resolver *credentialsResolver // output_destination auto only
	host     component.Host
	// autoDryRunReported: the auto dry run was reported as component status.
	autoDryRunReported atomic.Bool

	translations sync.Pool
}

// translationBuffers is the per-export scratch space, reused through a pool.
type translationBuffers struct {
	translation
	reqs []packedRequest
}

func newCloudWatchExporter(cfg *Config, set exporter.Settings) (*cloudWatchExporter, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	e := &cloudWatchExporter{
		id:         set.ID,
		cfg:        cfg,
		logger:     set.Logger,
		telemetry:  tb,
		translator: newTranslator(cfg),
		deltas:     newLoggedDeltaConverter(cfg.CumulativeState, set.Logger),
		series:     newSeriesLimiter(cfg.MaxSeriesPerMetric, set.Logger),
		slots:      make(chan struct{}, cfg.MaxConcurrentRequests),
		now:        time.Now,

		throttleDelay: throttleRetryDelay,
	}
	e.pace = adaptiverate.New(cfg.MaxRequestsPerSecond, time.Now)
	e.translations.New = func() any { return new(translationBuffers) }
	err = tb.RegisterExporterCloudwatchCumulativeSeriesCallback(func(_ context.Context, o metric.Int64Observer) error {
		o.Observe(int64(e.deltas.seriesCount()))
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = tb.RegisterExporterCloudwatchRequestRateLimitCallback(func(_ context.Context, o metric.Float64Observer) error {
		o.Observe(e.pace.Limit())
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = tb.RegisterExporterCloudwatchDryRunCallback(func(_ context.Context, o metric.Int64Observer) error {
		if e.dryRun.Load() {
			o.Observe(1)
		} else {
			o.Observe(0)
		}
		return nil
	})
	return e, err
}

func (e *cloudWatchExporter) start(ctx context.Context, host component.Host) error {
	e.host = host
	if id := e.cfg.CumulativeState.StorageID; id != nil {
		if err := e.attachStorage(ctx, host, *id); err != nil {
			return err
		}
	}
	switch e.cfg.OutputDestination {
	case destinationStdout:
		e.setDryRun(os.Stdout)
	case destinationFile:
		f, err := os.OpenFile(e.cfg.OutputPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("output_path: %w", err)
		}
		e.file = f
		e.setDryRun(f)
	case destinationCloudWatch:
		awsCfg, err := loadAWSConfig(ctx, e.cfg)
		if err != nil {
			return err
		}
		if awsCfg.Region == "" {
			return errors.New("region: not set, and no region found in the AWS environment or shared config")
		}
		p := newCloudWatchPutter(awsCfg, e.cfg.Endpoint)
		p.requestTimeout = e.cfg.RequestTimeout
		e.putter = p
	case destinationAuto:
		e.startAuto(ctx)
	}
	return nil
}

// startAuto decides between CloudWatch and a dry run once it knows: no
// region (or an unreadable AWS configuration) is a dry run at once; with a
// region, credentials are looked up in the background (see
// credentialsResolver) and requests are held in the sending queue meanwhile.
// A configured credentials source that fails is retried, never a dry run.
func (e *cloudWatchExporter) startAuto(ctx context.Context) {
	auto := &autoPutter{dryRun: &dryRunPutter{w: os.Stdout}}
	e.putter = auto
	decide := func(s autoState) {
		if s == autoDryRun {
			e.dryRun.Store(true)
			e.logger.Warn("No AWS region or credentials found: this is a dry run, printing to stdout the PutMetricData requests that would be sent to CloudWatch (set output_destination: cloudwatch to require AWS)")
		}
		auto.state.Store(int32(s))
	}
	awsCfg, err := loadAWSConfig(ctx, e.cfg)
	if err != nil || awsCfg.Region == "" || awsCfg.Credentials == nil {
		if err != nil {
			e.logger.Warn("The AWS configuration cannot be loaded", zap.Error(err))
		}
		decide(autoDryRun)
		return
	}
	configured := credentialSourceConfigured(e.cfg, os.Getenv)
	if !configured && strings.EqualFold(os.Getenv("AWS_EC2_METADATA_DISABLED"), "true") {
		decide(autoDryRun) // no source, and the instance metadata service is off
		return
	}
	cw := newCloudWatchPutter(awsCfg, e.cfg.Endpoint)
	cw.requestTimeout = e.cfg.RequestTimeout
	auto.cloudWatch = cw
	e.resolver = &credentialsResolver{
		creds: awsCfg.Credentials, configured: configured, logger: e.logger,
		decide: decide, backoff: credentialsBackoff,
	}
	e.resolver.resolve(ctx)
}

// reportAutoDryRun shows an auto dry run in the component status (once).
func (e *cloudWatchExporter) reportAutoDryRun() {
	if e.cfg.OutputDestination != destinationAuto || !e.dryRun.Load() || e.host == nil ||
		e.autoDryRunReported.Swap(true) {
		return
	}
	componentstatus.ReportStatus(e.host, componentstatus.NewRecoverableErrorEvent(errAutoDryRun))
}

// cumulativeStateStorageName names the exporter's client of the storage
// extension (the sending queue's is named after the signal, "metrics").
const cumulativeStateStorageName = "cumulative_state"

// attachStorage gets a client of the storage extension id and restores the
// cumulative state a previous process saved there.
func (e *cloudWatchExporter) attachStorage(ctx context.Context, host component.Host, id component.ID) error {
	ext, ok := host.GetExtensions()[id]
	if !ok {
		return fmt.Errorf("cumulative_state.storage: no extension %q is configured", id)
	}
	se, ok := ext.(storage.Extension)
	if !ok {
		return fmt.Errorf("cumulative_state.storage: extension %q is not a storage extension", id)
	}
	client, err := se.GetClient(ctx, component.KindExporter, e.id, cumulativeStateStorageName)
	if err != nil {
		return fmt.Errorf("cumulative_state.storage: %w", err)
	}
	if journal := e.cfg.CumulativeState.Journal; journal.Directory != "" {
		jc, _, err := statejournal.OpenFor(ctx, client, journal, component.KindExporter, e.id, cumulativeStateStorageName,
			"cumulative_state.journal", "cumulative state", e.logger)
		if err != nil {
			_ = client.Close(ctx)
			return err
		}
		client = jc
	}
	load := e.deltas.attachStorage(ctx, client, e.now())
	e.recordStorageErrors(ctx, storageRead, load.readErrors)
	if load.expired > 0 {
		e.telemetry.ExporterCloudwatchCumulativeEvictions.Add(ctx, int64(load.expired))
	}
	fields := []zap.Field{zap.Int("series", load.restored), zap.Int("expired", load.expired), zap.String("storage", id.String())}
	switch {
	case load.readErrors > 0:
		e.logger.Warn("Some cumulative state could not be read: the next point of those series is a baseline (not sent)",
			append(fields, zap.Int64("read_errors", load.readErrors))...)
	case load.listed:
		e.logger.Info("Restored the cumulative state", fields...)
	}
	return nil
}

// storageOperation is the `operation` attribute of cumulative_storage_errors.
type storageOperation string

const (
	storageRead  storageOperation = "read"
	storageWrite storageOperation = "write"
)

func (e *cloudWatchExporter) recordStorageErrors(ctx context.Context, op storageOperation, n int64) {
	if n > 0 {
		e.telemetry.ExporterCloudwatchCumulativeStorageErrors.Add(ctx, n,
			metric.WithAttributes(attribute.String("operation", string(op))))
	}
}

// saveState saves the cumulative state moved by records (see deltaConverter.save).
func (e *cloudWatchExporter) saveState(ctx context.Context, records []conversionRecord) {
	err := e.deltas.save(ctx, records)
	if err == nil {
		e.saveFailing.Store(false)
		return
	}
	e.recordStorageErrors(ctx, storageWrite, 1)
	if !e.saveFailing.Swap(true) { // log when it starts failing, not every time
		e.logger.Warn("Could not save the cumulative state; a restart now may count some deltas twice", zap.Error(err))
	}
}

func (e *cloudWatchExporter) setDryRun(w *os.File) {
	e.putter = &dryRunPutter{w: w}
	e.dryRun.Store(true)
}

func (e *cloudWatchExporter) shutdown(ctx context.Context) error {
	if e.resolver != nil {
		e.resolver.stop()
	}
	err := e.deltas.closeStorage(ctx)
	e.telemetry.Shutdown()
	if e.file != nil {
		err = errors.Join(err, e.file.Close())
	}
	return err
}

// pushMetrics sends md, which holds only deltas and gauges (see
// deltaConverter). When some requests fail, it hands back to exporterhelper
// only the data points of those requests: retryable failures as a
// consumererror.Metrics (throttling with a delay), invalid requests as
// permanent, so a retry never re-sends what CloudWatch accepted.
func (e *cloudWatchExporter) pushMetrics(ctx context.Context, md pmetric.Metrics) error {
	if e.putter == nil {
		return errors.New("cloudwatch exporter not started")
	}
	buf := e.translations.Get().(*translationBuffers)
	defer func() {
		buf.reqs = buf.reqs[:0]
		buf.reset()
		e.translations.Put(buf)
	}()

	now := e.now()
	e.translator.translate(md, now, &buf.translation)
	if e.series != nil {
		e.series.apply(&buf.translation, now)
	}
	e.recordDropped(ctx, &buf.dropped)
	e.recordAltered(ctx, &buf.altered)
	if len(buf.datums) == 0 {
		return nil
	}
	buf.reqs = pack(buf.datums, e.cfg.Namespace, buf.reqs)
	results := e.sendAll(ctx, buf.datums, buf.reqs)
	return e.settle(ctx, md, buf, results)
}

// errNotSent marks a request that was never attempted because the export was cancelled.
var errNotSent = errors.New("request not sent")

// sentRange is what happened to datums[first:first+n] of the packed datums:
// a whole request or, after a 413, one part of it.
type sentRange struct {
	first, n int
	err      error
}

// sendAll sends the requests, at most max_concurrent_requests at a time
// (across all exports), at the adaptive pace.
func (e *cloudWatchExporter) sendAll(ctx context.Context, packed []datum, reqs []packedRequest) []sentRange {
	results := make([][]sentRange, len(reqs))
	var wg sync.WaitGroup
	for i := range reqs {
		if err := e.acquire(ctx); err != nil {
			for j := i; j < len(reqs); j++ {
				results[j] = []sentRange{{first: reqs[j].first, n: reqs[j].n, err: fmt.Errorf("%w: %w", errNotSent, err)}}
			}
			break
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-e.slots }()
			r := reqs[i]
			results[i] = e.putSplitting(ctx, packed, r.first, r.n, results[i])
		}(i)
	}
	wg.Wait()
	var out []sentRange
	for _, r := range results {
		out = append(out, r...)
	}
	return out
}

// putSplitting sends packed[first:first+n]. When CloudWatch refuses it as
// too large (413, e.g. a limit lower than the one pack assumes), it is split
// in two at a data point boundary and each half sent the same way, down to
// one datum; a single datum refused for its size is rejected (dropped, counted).
func (e *cloudWatchExporter) putSplitting(ctx context.Context, packed []datum, first, n int, out []sentRange) []sentRange {
	err := e.putter.put(ctx, e.cfg.Namespace, packed[first:first+n])
	switch {
	case err == nil || ctx.Err() != nil:
	case isTooLarge(err) && n > 1:
		e.telemetry.ExporterCloudwatchRequests.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", "too_large_split")))
		half := splitPoint(packed[first : first+n])
		out = e.putSplitting(ctx, packed, first, half, out)
		return e.putSplitting(ctx, packed, first+half, n-half, out)
	case refusedAsInvalid(err):
		return e.isolateRejected(ctx, packed, first, n, err, out)
	}
	return append(out, sentRange{first: first, n: n, err: err})
}

// isolateRejected handles packed[first:first+n], refused as invalid (err):
// one data point CloudWatch does not take (a value the translation did not
// foresee) must not cost the others of its request. The request is sent
// again in two halves at a data point boundary; a half refused while the
// other passes is halved the same way, down to one data point, which is
// rejected alone. When both halves are refused the fault is in the whole
// request (or in both): both are rejected, so a request refused for what
// it shares costs two more requests, never one per point.
func (e *cloudWatchExporter) isolateRejected(ctx context.Context, packed []datum, first, n int, err error, out []sentRange) []sentRange {
	ds := packed[first : first+n]
	if ds[0].point == ds[n-1].point || ctx.Err() != nil {
		return append(out, sentRange{first: first, n: n, err: err})
	}
	e.telemetry.ExporterCloudwatchRequests.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", "rejected_split")))
	half := splitPoint(ds)
	left, right := sentRange{first: first, n: half}, sentRange{first: first + half, n: n - half}
	left.err = e.putter.put(ctx, e.cfg.Namespace, packed[left.first:left.first+left.n])
	right.err = e.putter.put(ctx, e.cfg.Namespace, packed[right.first:right.first+right.n])
	switch {
	case right.err == nil && refusedAsInvalid(left.err):
		return append(e.isolateRejected(ctx, packed, left.first, left.n, left.err, out), right)
	case left.err == nil && refusedAsInvalid(right.err):
		return e.isolateRejected(ctx, packed, right.first, right.n, right.err, append(out, left))
	}
	return append(out, left, right)
}

// splitPoint is where to cut ds (len >= 2) in two: the data point boundary
// nearest the middle, or the middle when ds is one data point.
func splitPoint(ds []datum) int {
	mid := len(ds) / 2
	for d := 0; d < len(ds); d++ {
		if i := mid - d; i > 0 && ds[i].point != ds[i-1].point {
			return i
		}
		if i := mid + d; i < len(ds) && i > 0 && ds[i].point != ds[i-1].point {
			return i
		}
	}
	return mid
}

func (e *cloudWatchExporter) acquire(ctx context.Context) error {
	select {
	case e.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	if !e.dryRun.Load() {
		if err := e.pace.Wait(ctx); err != nil {
			<-e.slots
			return err
		}
	}
	return nil
}

// settle counts what happened to each request and decides what to retry.
func (e *cloudWatchExporter) settle(ctx context.Context, md pmetric.Metrics, buf *translationBuffers, results []sentRange) error {
	var (
		sent, rejectedPoints int
		retry                []pointRef
		throttled            bool
		errs                 []error
		outcomes             [numOutcomes]int64
		authCode             string
	)
	for _, r := range results {
		err := r.err
		out := classify(err)
		if isTooLarge(err) {
			out = outcomeRejected // one datum too large for CloudWatch alone
		}
		if !errors.Is(err, errNotSent) {
			outcomes[out]++
		}
		ds := buf.datums[r.first : r.first+r.n]
		switch out {
		case outcomeSuccess:
			sent += r.n
			continue
		case outcomeRejected:
			n := forEachPoint(ds, func(int32) {})
			rejectedPoints += n
			e.logger.Warn("CloudWatch rejected a PutMetricData request; its data points are dropped",
				zap.Int("datums", r.n), zap.Int("data_points", n), zap.Error(err))
		default:
			if out == outcomeAuthError && authCode == "" {
				authCode = cmp.Or(errorCode(err), "HTTP auth status")
			}
			throttled = throttled || out == outcomeThrottled
			forEachPoint(ds, func(p int32) { retry = append(retry, buf.points[p]) })
		}
		errs = append(errs, err)
	}

	if e.dryRun.Load() {
		e.reportAutoDryRun()
	} else {
		for o, n := range outcomes {
			if n > 0 {
				e.telemetry.ExporterCloudwatchRequests.Add(ctx, n,
					metric.WithAttributes(attribute.String("outcome", requestOutcome(o).String())))
			}
		}
		// Printed datums are not sent.
		e.telemetry.ExporterCloudwatchDatumsSent.Add(ctx, int64(sent))
	}
	if rejectedPoints > 0 {
		var d dropCounts
		d[reasonRejected] = rejectedPoints
		e.recordDropped(ctx, &d)
	}
	if len(errs) == 0 {
		return nil
	}
	if authCode != "" {
		e.logger.Warn("CloudWatch refused the credentials; they are retrieved again and the data retried until retry_on_failure.max_elapsed_time",
			zap.String("aws_error_code", authCode))
	}
	err := fmt.Errorf("%d of %d PutMetricData requests failed: %w", len(errs), len(results), errors.Join(errs...))
	if len(retry) == 0 {
		return consumererror.NewPermanent(err)
	}
	failed := subset(md, retry)
	e.telemetry.ExporterCloudwatchPointsRetried.Add(ctx, int64(failed.DataPointCount()))
	err = consumererror.NewMetrics(err, failed)
	if throttled {
		e.pace.Throttled()
		err = exporterhelper.NewThrottleRetry(err, e.throttleDelay)
	}
	return err
}

// forEachPoint calls fn once per data point of ds (a point's datums are
// adjacent) and returns how many points there were.
func forEachPoint(ds []datum, fn func(point int32)) int {
	n := 0
	for i := range ds {
		if i == 0 || ds[i].point != ds[i-1].point {
			fn(ds[i].point)
			n++
		}
	}
	return n
}

func (e *cloudWatchExporter) recordAltered(ctx context.Context, a *alterCounts) {
	for r, n := range a {
		if n > 0 {
			e.telemetry.ExporterCloudwatchPointsAltered.Add(ctx, int64(n),
				metric.WithAttributes(attribute.String("reason", alterReason(r).String())))
		}
	}
}

func (e *cloudWatchExporter) recordDropped(ctx context.Context, d *dropCounts) {
	for r, n := range d {
		if n > 0 {
			e.telemetry.ExporterCloudwatchPointsDropped.Add(ctx, int64(n),
				metric.WithAttributes(attribute.String("reason", dropReason(r).String())))
		}
	}
}

// subset copies out of md the data points refs point to, keeping their
// resource, scope and metric; it is what a retry re-sends.
func subset(md pmetric.Metrics, refs []pointRef) pmetric.Metrics {
	slices.SortFunc(refs, func(a, b pointRef) int {
		return cmp.Or(cmp.Compare(a.resource, b.resource), cmp.Compare(a.scope, b.scope),
			cmp.Compare(a.metric, b.metric), cmp.Compare(a.point, b.point))
	})
	refs = slices.Compact(refs)

	out := pmetric.NewMetrics()
	var (
		rm  pmetric.ResourceMetrics
		sm  pmetric.ScopeMetrics
		m   pmetric.Metric
		cur = pointRef{-1, -1, -1, -1}
	)
	for _, r := range refs {
		srcRM := md.ResourceMetrics().At(int(r.resource))
		srcSM := srcRM.ScopeMetrics().At(int(r.scope))
		srcM := srcSM.Metrics().At(int(r.metric))
		if r.resource != cur.resource {
			rm = out.ResourceMetrics().AppendEmpty()
			srcRM.Resource().CopyTo(rm.Resource())
			rm.SetSchemaUrl(srcRM.SchemaUrl())
			cur = pointRef{r.resource, -1, -1, -1}
		}
		if r.scope != cur.scope {
			sm = rm.ScopeMetrics().AppendEmpty()
			srcSM.Scope().CopyTo(sm.Scope())
			sm.SetSchemaUrl(srcSM.SchemaUrl())
			cur.scope, cur.metric = r.scope, -1
		}
		if r.metric != cur.metric {
			m = sm.Metrics().AppendEmpty()
			pmetricutil.CopyMetricWithoutPoints(srcM, m)
			cur.metric = r.metric
		}
		pmetricutil.AppendPoint(srcM, m, int(r.point))
	}
	return out
}
