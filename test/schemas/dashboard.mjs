// Checks a CloudWatch dashboard body against the structure CloudWatch
// documents ("Dashboard body structure and syntax", CloudWatch API
// Reference): the top-level fields, the widget fields and, for metric, text,
// alarm and log widgets, their properties and the metric arrays' rendering
// properties; unknown fields are errors, as PutDashboard's validation
// reports them.
import Ajv from 'ajv';
import { checkExpression } from './cloudwatch.mjs';

const renderingProps = {
  type: 'object',
  additionalProperties: false,
  properties: {
    accountId: { type: 'string' }, color: { type: 'string', pattern: '^#[0-9a-fA-F]{6}$' }, expression: { type: 'string' },
    id: { type: 'string', pattern: '^[a-z][a-zA-Z0-9_]*$' }, label: { type: 'string' }, period: { type: 'integer', minimum: 1 },
    region: { type: 'string' }, stat: { type: 'string' }, visible: { type: 'boolean' }, yAxis: { enum: ['left', 'right'] },
  },
};
const horizontal = {
  type: 'object', additionalProperties: false, required: ['value'],
  properties: {
    value: { type: 'number' }, label: { type: 'string' }, color: { type: 'string' },
    fill: { enum: ['above', 'below', 'between'] }, visible: { type: 'boolean' }, yAxis: { enum: ['left', 'right'] },
  },
};
const vertical = {
  type: 'object', additionalProperties: false, required: ['value'],
  properties: {
    value: { type: 'string' }, label: { type: 'string' }, color: { type: 'string' },
    fill: { enum: ['before', 'after'] }, visible: { type: 'boolean' },
  },
};
const axis = {
  type: 'object', additionalProperties: false,
  properties: { label: { type: 'string' }, min: { type: 'number' }, max: { type: 'number' }, showUnits: { type: 'boolean' } },
};
const props = {
  metric: {
    type: 'object', additionalProperties: false, required: ['region'],
    properties: {
      accountId: { type: 'string' },
      annotations: {
        type: 'object', additionalProperties: false,
        properties: {
          horizontal: { type: 'array', items: { anyOf: [horizontal, { type: 'array', items: horizontal, minItems: 2, maxItems: 2 }] } },
          vertical: { type: 'array', items: { anyOf: [vertical, { type: 'array', items: vertical, minItems: 2, maxItems: 2 }] } },
          alarms: { type: 'array', items: { type: 'string' } },
        },
      },
      liveData: { type: 'boolean' },
      legend: { type: 'object', additionalProperties: false, properties: { position: { enum: ['right', 'bottom', 'hidden'] } } },
      metrics: {
        type: 'array',
        items: {
          type: 'array', minItems: 1,
          // Namespace, metric name, dimension name/value pairs, then at most
          // one object of rendering properties, last.
          items: { anyOf: [{ type: 'string' }, renderingProps] },
        },
      },
      period: { type: 'integer', minimum: 1 },
      region: { type: 'string' },
      setPeriodToTimeRange: { type: 'boolean' },
      singleValueFullPrecision: { type: 'boolean' },
      sparkline: { type: 'boolean' },
      stacked: { type: 'boolean' },
      stat: { type: 'string' },
      timezone: { type: 'string' },
      title: { type: 'string' },
      trend: { type: 'boolean' },
      view: { enum: ['timeSeries', 'singleValue', 'gauge', 'bar', 'pie', 'table'] },
      yAxis: { type: 'object', additionalProperties: false, properties: { left: axis, right: axis } },
      labels: { type: 'object', additionalProperties: false, properties: { visible: { type: 'boolean' } } },
      table: { type: 'object' },
    },
  },
  text: {
    type: 'object', additionalProperties: false, required: ['markdown'],
    properties: { markdown: { type: 'string' }, background: { enum: ['solid', 'transparent'] } },
  },
  alarm: {
    type: 'object', additionalProperties: false, required: ['alarms'],
    properties: {
      alarms: { type: 'array', items: { type: 'string' } }, sortBy: { enum: ['default', 'stateUpdatedTimestamp', 'timestamp'] },
      states: { type: 'array', items: { enum: ['ALARM', 'INSUFFICIENT_DATA', 'OK'] } }, title: { type: 'string' },
    },
  },
  log: {
    type: 'object', additionalProperties: false, required: ['query', 'region'],
    properties: {
      accountId: { type: 'string' }, query: { type: 'string' }, region: { type: 'string' }, stacked: { type: 'boolean' },
      title: { type: 'string' }, view: { enum: ['table', 'timeSeries', 'bar', 'pie'] },
    },
  },
};
const widget = (type) => ({
  if: { properties: { type: { const: type } } },
  then: { properties: { properties: props[type] } },
});
export const schema = {
  type: 'object', additionalProperties: false, required: ['widgets'],
  properties: {
    start: { type: 'string' }, end: { type: 'string' }, periodOverride: { enum: ['auto', 'inherit'] },
    variables: { type: 'array' },
    widgets: {
      type: 'array', maxItems: 500,
      items: {
        type: 'object', additionalProperties: false, required: ['type', 'properties'],
        properties: {
          type: { enum: ['metric', 'text', 'alarm', 'log', 'explorer', 'custom'] },
          x: { type: 'integer', minimum: 0, maximum: 23 }, y: { type: 'integer', minimum: 0 },
          width: { type: 'integer', minimum: 1, maximum: 24 }, height: { type: 'integer', minimum: 1, maximum: 1000 },
          properties: { type: 'object' },
        },
        allOf: Object.keys(props).map(widget),
      },
    },
  },
};

const validate = new Ajv({ allErrors: true }).compile(schema);

// checkBody returns the problems of one dashboard body (a JSON string or
// the parsed object).
export function checkBody(body) {
  let d = body;
  if (typeof body === 'string') {
    try {
      d = JSON.parse(body);
    } catch (err) {
      return [`not JSON: ${err.message}`];
    }
  }
  const problems = [];
  if (!validate(d)) {
    for (const e of validate.errors) {
      if (e.keyword === 'if' || e.keyword === 'anyOf') continue; // the branch's own errors say more
      const extra = e.params?.additionalProperty ? ` (${e.params.additionalProperty})` : '';
      problems.push(`${e.instancePath || '/'}: ${e.message}${extra}`);
    }
  }
  (d?.widgets || []).forEach((w, i) => {
    if ((w.x ?? 0) + (w.width ?? 6) > 24) problems.push(`/widgets/${i}: x + width beyond the 24 columns`);
    const rendering = (w.properties?.metrics || []).map((m) => (Array.isArray(m) ? m.find((e) => e && typeof e === 'object') : null));
    const ids = new Set(rendering.map((r) => r?.id).filter(Boolean));
    rendering.forEach((r, j) => {
      if (typeof r?.expression !== 'string') return;
      for (const e of checkExpression(r.expression, ids, r.id, { alarm: false })) {
        problems.push(`/widgets/${i}/properties/metrics/${j}: ${e}`);
      }
    });
    (w.properties?.metrics || []).forEach((m, j) => {
      const objs = m.filter((e) => typeof e === 'object');
      if (objs.length > 1 || (objs.length === 1 && typeof m[m.length - 1] !== 'object')) {
        problems.push(`/widgets/${i}/properties/metrics/${j}: the rendering properties must be one object, last`);
      }
      if (objs.length === 0 || !objs[0].expression) {
        const strings = m.filter((e) => typeof e === 'string');
        if (strings.length < 2 && !strings.every((s) => s === '...' || s === '.')) {
          problems.push(`/widgets/${i}/properties/metrics/${j}: a metric needs its namespace and name, or an expression`);
        }
      }
    });
  });
  return [...new Set(problems)];
}
