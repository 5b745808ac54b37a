// What CloudWatch's API accepts beyond property names (PutMetricAlarm and
// the metric math, SEARCH and Metrics Insights syntax its user guide
// documents): the alarm's metric queries, the expressions' references to
// query ids, and the shape of each SEARCH and SELECT.
const ID = /^[a-z][a-zA-Z0-9_]*$/;
const FUNCS = ['AVG', 'COUNT', 'MAX', 'MIN', 'SUM'];
const STAT = /^(SampleCount|Average|Sum|Minimum|Maximum|IQM|(p|tm|wm|tc|ts|pr)\d{1,2}(\.\d+)?|(TM|WM|TC|TS|PR)\(\d*(\.\d+)?%?:\d*(\.\d+)?%?\))$/;

// strip removes quoted strings, so that words inside them are not taken
// for ids or keywords.
const strip = (s) => s.replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""');

// idsIn: the lowercase words of a math expression that are not function
// names: references to other queries' ids.
export const idsIn = (expr) => [...new Set([...strip(expr).matchAll(/\b([a-z][a-zA-Z0-9_]*)\b(?!\s*\()/g)].map((m) => m[1]))];

function balanced(s) {
  let depth = 0;
  for (const c of strip(s)) {
    if (c === '(') depth++;
    else if (c === ')' && --depth < 0) return false;
  }
  return depth === 0;
}

// checkSelect checks a Metrics Insights query's clauses and their order.
export function checkSelect(q) {
  const out = [];
  const re = new RegExp(String.raw`^SELECT\s+(${FUNCS.join('|')})\(\s*("[^"]+"|[A-Za-z0-9_.\-]+)\s*\)\s+FROM\s+` +
    String.raw`(SCHEMA\(\s*("[^"]+"|[A-Za-z0-9_./\-]+)(\s*,\s*("[^"]+"|[A-Za-z0-9_.\-]+))*\s*\)|"[^"]+"|[A-Za-z0-9_./\-]+)` +
    String.raw`(\s+WHERE\s+(?<where>.+?))?(\s+GROUP BY\s+(?<group>.+?))?` +
    String.raw`(\s+ORDER BY\s+(?<order>(${FUNCS.join('|')})\(\)(\s+(ASC|DESC))?))?(\s+LIMIT\s+(?<limit>\d+))?\s*$`, 's');
  const m = re.exec(q);
  if (!m) return [`not a Metrics Insights query (SELECT FUNC(metric) FROM SCHEMA(...) [WHERE] [GROUP BY] [ORDER BY FUNC() ASC|DESC] [LIMIT n]): ${q}`];
  if (m.groups.limit && Number(m.groups.limit) > 500) out.push(`LIMIT ${m.groups.limit}: at most 500 series`);
  if (m.groups.where) {
    const rest = m.groups.where
      .replace(/("[^"]+"|[A-Za-z0-9_.\-]+)\s*(=|!=|NOT LIKE|LIKE)\s*'[^']*'/g, ' ')
      .replace(/\b(AND|OR|NOT)\b|[()]/g, ' ');
    if (rest.trim() !== '') out.push(`WHERE: want "dimension" = 'value' comparisons joined by AND/OR, not: ${rest.trim()}`);
  }
  return out;
}

// checkSearch checks a SEARCH('{Namespace,dims} terms', 'Stat', Period).
export function checkSearch(expr) {
  const out = [];
  for (const m of expr.matchAll(/SEARCH\(/g)) {
    const rest = expr.slice(m.index);
    const call = /^SEARCH\(\s*'((?:[^'\\]|\\.)*)'\s*,\s*'([^']+)'\s*,\s*(\d+)\s*\)/.exec(rest);
    if (!call) {
      out.push(`SEARCH takes ('search expression', 'statistic', period): ${rest.slice(0, 120)}`);
      continue;
    }
    const [, search, stat, period] = call;
    if (!STAT.test(stat)) out.push(`SEARCH statistic ${stat} is not a CloudWatch statistic`);
    if (Number(period) < 1 || (Number(period) >= 60 && Number(period) % 60 !== 0)) out.push(`SEARCH period ${period}: 1, 5, 10, 30 or a multiple of 60`);
    const schema = /\{([^}]*)\}/.exec(search);
    if (schema && schema[1].split(',').some((p) => p.trim() === '')) out.push(`SEARCH schema {${schema[1]}} has an empty name`);
    if ((search.match(/"/g) || []).length % 2) out.push(`SEARCH expression has an unclosed quote: ${search}`);
  }
  return out;
}

// checkExpression checks one expression of a query list with ids.
export function checkExpression(expr, ids, self, { alarm }) {
  const out = [];
  if (/^\s*SELECT\b/.test(expr)) return checkSelect(expr.trim());
  if (!balanced(expr)) out.push(`unbalanced parentheses: ${expr}`);
  if (/\bSEARCH\(/.test(expr)) {
    if (alarm) out.push('an alarm cannot use a SEARCH expression');
    out.push(...checkSearch(expr));
  }
  for (const id of idsIn(expr.replace(/SEARCH\(\s*'(?:[^'\\]|\\.)*'/g, 'SEARCH('))) {
    if (id === self) out.push(`expression refers to its own id ${id}`);
    else if (!ids.has(id)) out.push(`expression refers to ${id}, which no query has as its id`);
  }
  return out;
}

// checkAlarm checks AWS::CloudWatch::Alarm properties (PutMetricAlarm's
// rules), with the template's substitutions already made in expressions.
export function checkAlarm(p) {
  const out = [];
  const single = p.MetricName !== undefined;
  if (single === (p.Metrics !== undefined)) out.push('want exactly one of MetricName and Metrics');
  if (single) {
    if ((p.Statistic === undefined) === (p.ExtendedStatistic === undefined)) out.push('want exactly one of Statistic and ExtendedStatistic');
    if (p.Period === undefined) out.push('MetricName needs Period');
    if (typeof p.ExtendedStatistic === 'string' && !STAT.test(p.ExtendedStatistic)) out.push(`ExtendedStatistic ${p.ExtendedStatistic} is not a CloudWatch statistic`);
  }
  if (!Array.isArray(p.Metrics)) return out;
  for (const k of ['Statistic', 'ExtendedStatistic', 'Period', 'Namespace', 'Dimensions']) {
    if (p[k] !== undefined) out.push(`${k} goes in the Metrics entries, not beside them`);
  }
  const ids = new Set();
  for (const q of p.Metrics) {
    if (!ID.test(q.Id ?? '')) out.push(`Id ${q.Id}: want a lowercase letter, then letters, digits, underscores`);
    if (ids.has(q.Id)) out.push(`Id ${q.Id} twice`);
    ids.add(q.Id);
  }
  // An anomaly detection alarm returns the metric and its band
  // (ThresholdMetricId); any other alarm one result.
  const returned = p.Metrics.filter((q) => q.ReturnData !== false).map((q) => q.Id);
  if (p.ThresholdMetricId !== undefined) {
    if (!ids.has(p.ThresholdMetricId)) out.push(`ThresholdMetricId ${p.ThresholdMetricId}: no query has it as its id`);
    if (returned.length !== 2 || !returned.includes(p.ThresholdMetricId)) out.push('want ReturnData true on the band (ThresholdMetricId) and one metric');
  } else if (returned.length !== 1) {
    out.push('want exactly one Metrics entry with ReturnData true (it defaults to true)');
  }
  const periods = new Set();
  for (const q of p.Metrics) {
    if ((q.Expression === undefined) === (q.MetricStat === undefined)) out.push(`${q.Id}: want exactly one of Expression and MetricStat`);
    if (q.MetricStat) periods.add(Number(q.MetricStat.Period));
    if (typeof q.Expression !== 'string') continue;
    if (/^\s*SELECT\b/.test(q.Expression)) {
      if (q.Period === undefined) out.push(`${q.Id}: a Metrics Insights query in an alarm needs Period`);
      else periods.add(Number(q.Period));
    }
    out.push(...checkExpression(q.Expression, ids, q.Id, { alarm: true }).map((e) => `${q.Id}: ${e}`));
  }
  if (periods.size > 1) out.push(`the alarm's queries use different periods: ${[...periods].join(', ')}`);
  return out;
}
