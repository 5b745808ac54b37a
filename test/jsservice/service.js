'use strict';
// A GPU vector-index build service shaped like OpenSearch's
// remote-vector-index-builder, instrumented with the OpenTelemetry JS SDK at
// its defaults (spans batched 5 s, metrics every 60 s unless
// OTEL_METRIC_EXPORT_INTERVAL says otherwise, cumulative temporality). Its
// telemetry follows docs/build-service-contract.md. It keeps its own ground
// truth (runs by result, requests by route/method/status class) and serves
// it on GET /_truth. POST /_flush sends the spans and log records waiting in
// the SDK's batches and a metric export at once, and answers once the
// collector took them (500 if an export failed). Both are left out of the instrumentation so
// that reading the truth or flushing does not change it.
//
// Environment: PORT (default 1025), LISTEN_HOST (default 127.0.0.1), OTEL_EXPORTER_OTLP_PROTOCOL (grpc or
// http/protobuf, default grpc), OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_METRIC_EXPORT_INTERVAL (ms, default 60000), OTEL_SERVICE_NAME, and
// the SDK's own batch settings (OTEL_BSP_*, OTEL_BLRP_*).

const crypto = require('node:crypto');
const { NodeSDK } = require('@opentelemetry/sdk-node');
const { HttpInstrumentation } = require('@opentelemetry/instrumentation-http');
const { ExpressInstrumentation } = require('@opentelemetry/instrumentation-express');
const { PeriodicExportingMetricReader } = require('@opentelemetry/sdk-metrics');
const { BatchSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { BatchLogRecordProcessor } = require('@opentelemetry/sdk-logs');
const { resourceFromAttributes } = require('@opentelemetry/resources');

const TRUTH_PATH = '/_truth';
// POST: send the spans and log records waiting in the SDK's batches, and the
// metrics, now.
const FLUSH_PATH = '/_flush';
const UNCOUNTED = new Set([TRUTH_PATH, FLUSH_PATH]);

function exporters(protocol) {
  switch (protocol) {
    case 'grpc':
      return {
        traces: new (require('@opentelemetry/exporter-trace-otlp-grpc').OTLPTraceExporter)(),
        metrics: new (require('@opentelemetry/exporter-metrics-otlp-grpc').OTLPMetricExporter)(),
        logs: new (require('@opentelemetry/exporter-logs-otlp-grpc').OTLPLogExporter)(),
      };
    case 'http/protobuf':
      return {
        traces: new (require('@opentelemetry/exporter-trace-otlp-proto').OTLPTraceExporter)(),
        metrics: new (require('@opentelemetry/exporter-metrics-otlp-proto').OTLPMetricExporter)(),
        logs: new (require('@opentelemetry/exporter-logs-otlp-proto').OTLPLogExporter)(),
      };
    default:
      throw new Error(`OTEL_EXPORTER_OTLP_PROTOCOL=${protocol}: want grpc or http/protobuf`);
  }
}

const exp = exporters(process.env.OTEL_EXPORTER_OTLP_PROTOCOL || 'grpc');
const spanBatch = new BatchSpanProcessor(exp.traces);
const logBatch = new BatchLogRecordProcessor({ exporter: exp.logs });
const metricReader = new PeriodicExportingMetricReader({
  exporter: exp.metrics,
  exportIntervalMillis: Number(process.env.OTEL_METRIC_EXPORT_INTERVAL || 60000),
});
const sdk = new NodeSDK({
  // A restarted process is a new instance with new start times.
  resource: resourceFromAttributes({ 'service.instance.id': crypto.randomUUID() }),
  spanProcessors: [spanBatch],
  metricReaders: [metricReader],
  logRecordProcessors: [logBatch],
  instrumentations: [
    new HttpInstrumentation({ ignoreIncomingRequestHook: (req) => UNCOUNTED.has(req.url) }),
    new ExpressInstrumentation(),
  ],
});
sdk.start();

// Required after sdk.start() so that the instrumentations patch them.
const express = require('express');
const { trace, context, SpanStatusCode } = require('@opentelemetry/api');
const { logs } = require('@opentelemetry/api-logs');

const tracer = trace.getTracer('build_service');
const jobLog = logs.getLogger('build_service.jobs');
const STAGES = ['download', 'gpu_build', 'gpu_to_cpu', 'upload'];
const BEFORE_BUILD = 'before_build';
const DIMS = { 'build.engine': 'faiss', 'build.data_type': 'float' };

const jobs = new Map(); // job id -> { status }
const truth = { jobs: {}, requests: {} };

function bump(obj, key) { obj[key] = (obj[key] || 0) + 1; }

function setStatus(id, job, status) {
  job.status = status;
  jobLog.emit({
    severityText: 'INFO',
    body: `job ${id} is ${status}`,
    attributes: { 'build.job.id': id, 'build.job.status': status, ...DIMS },
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// runBuild runs the stages as children of a job span (a root span of its
// own, linked to the request). fail_at names the stage that fails, if any,
// or BEFORE_BUILD: the job fails before its build (and its span) begins,
// as when its input cannot be read.
async function runBuild(id, job, req, link) {
  if (req.fail_at === BEFORE_BUILD) {
    await sleep(req.stage_ms);
    setStatus(id, job, 'FAILED_INDEX_BUILD');
    bump(truth.jobs, 'failure');
    return;
  }
  const span = tracer.startSpan('index_build',
    { attributes: { 'build.job.id': id, ...DIMS }, links: [{ context: link }] }, context.active());
  const ctx = trace.setSpan(context.active(), span);
  try {
    for (const stage of STAGES) {
      const st = tracer.startSpan(stage, { attributes: { 'build.stage': stage, 'build.job.id': id, ...DIMS } }, ctx);
      try {
        await sleep(req.stage_ms);
        if (req.fail_at === stage) throw new Error(`${stage} failed`);
      } catch (err) {
        st.recordException(err);
        st.setStatus({ code: SpanStatusCode.ERROR, message: err.message });
        throw err;
      } finally {
        st.end();
      }
    }
  } catch (err) {
    span.recordException(err);
    span.setStatus({ code: SpanStatusCode.ERROR, message: err.message });
    span.end();
    setStatus(id, job, 'FAILED_INDEX_BUILD');
    bump(truth.jobs, 'failure');
    return;
  }
  span.end();
  setStatus(id, job, 'COMPLETED_INDEX_BUILD');
  bump(truth.jobs, 'success');
}

const app = express();
app.use(express.json());
app.use((req, res, next) => {
  if (UNCOUNTED.has(req.path)) return next();
  res.on('finish', () => {
    const route = req.route ? req.baseUrl + req.route.path : '';
    bump(truth.requests, `${route} ${req.method} ${Math.floor(res.statusCode / 100)}xx`);
  });
  next();
});

// POST /_build {vector_path, tenant_id, fail_at?, stage_ms?}: the job id is a
// hash of path and tenant, so a retried request reuses it; a job still
// running is not started twice, a finished one runs again (a new run).
app.post('/_build', (req, res) => {
  const b = req.body || {};
  if (typeof b.vector_path !== 'string' || typeof b.tenant_id !== 'string') {
    return res.status(400).json({ error: 'vector_path and tenant_id are required' });
  }
  if (b.fail_at !== undefined && !STAGES.includes(b.fail_at) && b.fail_at !== BEFORE_BUILD) {
    return res.status(400).json({ error: `fail_at must be one of ${STAGES.join(', ')}, ${BEFORE_BUILD}` });
  }
  const id = crypto.createHash('sha256').update(`${b.vector_path}\0${b.tenant_id}`).digest('hex').slice(0, 32);
  let job = jobs.get(id);
  if (job && job.status === 'RUNNING_INDEX_BUILD') return res.json({ job_id: id });
  job = { status: '' };
  jobs.set(id, job);
  setStatus(id, job, 'RUNNING_INDEX_BUILD');
  const spec = { fail_at: b.fail_at, stage_ms: Number.isFinite(b.stage_ms) ? b.stage_ms : 10 };
  runBuild(id, job, spec, trace.getActiveSpan().spanContext());
  return res.json({ job_id: id });
});

const STATUS = { RUNNING_INDEX_BUILD: 'RUNNING', COMPLETED_INDEX_BUILD: 'COMPLETED', FAILED_INDEX_BUILD: 'FAILED' };
app.get('/_status/:job_id', (req, res) => {
  const job = jobs.get(req.params.job_id);
  if (!job) return res.status(404).json({ error: 'no such job' });
  return res.json({ task_status: STATUS[job.status] });
});

app.get(TRUTH_PATH, (req, res) => res.json(truth));

app.post(FLUSH_PATH, async (req, res) => {
  try {
    await Promise.all([spanBatch.forceFlush(), logBatch.forceFlush(), metricReader.forceFlush()]);
    res.status(204).end();
  } catch (err) {
    res.status(500).json({ error: String(err) });
  }
});

const server = app.listen(Number(process.env.PORT || 1025), process.env.LISTEN_HOST || '127.0.0.1', () => {
  console.log(`listening on ${server.address().port}`);
});

let stopping = false;
async function stop() {
  if (stopping) return;
  stopping = true;
  server.close();
  server.closeAllConnections();
  // Flushes the last batches: without it the last runs' ends are lost.
  try { await sdk.shutdown(); } catch (err) { console.error('sdk shutdown:', err); }
  console.log(`truth ${JSON.stringify(truth)}`);
  process.exit(0);
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
