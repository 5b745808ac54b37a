// Checks a CloudFormation template against the CloudFormation resource
// specification (@aws-cdk/cfnspec): resource types, property names, required
// properties and value shapes, after expanding Fn::ForEach
// (AWS::LanguageExtensions) as CloudFormation does; and that every Ref,
// Fn::GetAtt, Fn::Sub variable and condition resolves.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import yaml from 'js-yaml';
import { checkAlarm } from './cloudwatch.mjs';

const require = createRequire(import.meta.url);
const spec = require('@aws-cdk/cfnspec/spec/specification.json');

// The short forms (!Ref, !Sub, ...) as their long forms.
const FUNCS = ['Base64', 'Cidr', 'Equals', 'FindInMap', 'GetAtt', 'GetAZs', 'If', 'ImportValue', 'Join', 'Length',
  'Not', 'And', 'Or', 'Select', 'Split', 'Sub', 'ToJsonString', 'Condition'];
const tags = [];
for (const kind of ['scalar', 'sequence', 'mapping']) {
  tags.push(new yaml.Type('!Ref', { kind, construct: (d) => ({ Ref: d }) }));
  for (const f of FUNCS) {
    const name = f === 'Condition' ? 'Condition' : `Fn::${f}`;
    tags.push(new yaml.Type(`!${f}`, {
      kind,
      construct: (d) => ({ [name]: f === 'GetAtt' && typeof d === 'string' ? d.split('.') : d }),
    }));
  }
}
const SCHEMA = yaml.DEFAULT_SCHEMA.extend(tags);
export const loadTemplate = (text) => yaml.load(text, { schema: SCHEMA });

const TOP = new Set(['AWSTemplateFormatVersion', 'Description', 'Metadata', 'Parameters', 'Rules', 'Mappings',
  'Conditions', 'Transform', 'Resources', 'Outputs']);
const RESOURCE_KEYS = new Set(['Type', 'Properties', 'Condition', 'DependsOn', 'DeletionPolicy', 'UpdateReplacePolicy',
  'Metadata', 'CreationPolicy', 'UpdatePolicy']);
const PSEUDO = new Set(['AWS::AccountId', 'AWS::NotificationARNs', 'AWS::NoValue', 'AWS::Partition', 'AWS::Region',
  'AWS::StackId', 'AWS::StackName', 'AWS::URLSuffix']);
const PARAM_TYPES = /^(String|Number|List<Number>|CommaDelimitedList|AWS::[A-Za-z0-9:]+|List<AWS::[A-Za-z0-9:]+>|AWS::SSM::Parameter::Value<.+>)$/;
const INTRINSICS = new Set(['Ref', 'Condition', ...FUNCS.filter((f) => f !== 'Condition').map((f) => `Fn::${f}`)]);

// Fn::ForEach::Name: [Identifier, Collection, {OutputKey: Value}].
function expand(obj, params, where, problems) {
  if (Array.isArray(obj)) return obj.map((v) => expand(v, params, where, problems));
  if (obj === null || typeof obj !== 'object') return obj;
  const out = {};
  for (const [k, v] of Object.entries(obj)) {
    if (!k.startsWith('Fn::ForEach::')) {
      out[k] = expand(v, params, `${where}.${k}`, problems);
      continue;
    }
    if (!Array.isArray(v) || v.length !== 3 || typeof v[0] !== 'string' || typeof v[2] !== 'object') {
      problems.push(`${where}.${k}: Fn::ForEach takes [identifier, collection, {output key: value}]`);
      continue;
    }
    const [id, coll, tmpl] = v;
    let items = coll;
    if (coll && typeof coll === 'object' && !Array.isArray(coll) && 'Ref' in coll) {
      const p = params[coll.Ref];
      if (!p || !/CommaDelimitedList|List</.test(p.Type)) {
        problems.push(`${where}.${k}: collection Ref ${coll.Ref} is not a list parameter`);
        continue;
      }
      items = String(p.Default ?? 'example').split(',').map((s) => s.trim());
    }
    if (!Array.isArray(items)) {
      problems.push(`${where}.${k}: collection must be a list or a Ref to a list parameter`);
      continue;
    }
    for (const item of items) {
      const subst = substitute(tmpl, id, String(item));
      for (const [ok, ov] of Object.entries(expand(subst, params, `${where}.${k}`, problems))) {
        if (!ok.startsWith('Fn::ForEach::') && !/^[A-Za-z0-9]+$/.test(ok)) {
          problems.push(`${where}.${k}: output key ${JSON.stringify(ok)} is not alphanumeric`);
        }
        out[ok] = ov;
      }
    }
  }
  return out;
}

function substitute(v, id, item) {
  const alnum = item.replace(/[^A-Za-z0-9]/g, '');
  const s = (str) => str.split('${' + id + '}').join(item).split('&{' + id + '}').join(alnum);
  if (typeof v === 'string') return s(v);
  if (Array.isArray(v)) return v.map((x) => substitute(x, id, item));
  if (v && typeof v === 'object') {
    if (Object.keys(v).length === 1 && v.Ref === id) return item;
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [s(k), substitute(x, id, item)]));
  }
  return v;
}

const isIntrinsic = (v) => v && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length === 1 &&
  (Object.keys(v)[0] === 'Ref' || Object.keys(v)[0].startsWith('Fn::'));

export function checkTemplate(tmpl) {
  const problems = [];
  if (!tmpl || typeof tmpl !== 'object') return ['not a template'];
  for (const k of Object.keys(tmpl)) if (!TOP.has(k)) problems.push(`unknown top-level section ${k}`);
  const params = tmpl.Parameters || {};
  for (const [name, p] of Object.entries(params)) {
    if (!PARAM_TYPES.test(p?.Type ?? '')) problems.push(`Parameters.${name}: Type ${p?.Type} is not a parameter type`);
  }
  const transforms = [].concat(tmpl.Transform || []);
  const hasForEach = JSON.stringify(tmpl).includes('"Fn::ForEach::');
  if (hasForEach && !transforms.includes('AWS::LanguageExtensions')) {
    problems.push('Fn::ForEach needs Transform: AWS::LanguageExtensions');
  }
  const resources = expand(tmpl.Resources || {}, params, 'Resources', problems);
  const outputs = expand(tmpl.Outputs || {}, params, 'Outputs', problems);
  const conditions = tmpl.Conditions || {};
  if (Object.keys(resources).length === 0) problems.push('no Resources');

  const ctx = { params, resources, conditions, problems };
  for (const [name, c] of Object.entries(conditions)) checkRefs(c, `Conditions.${name}`, ctx);
  for (const [name, r] of Object.entries(resources)) {
    const where = `Resources.${name}`;
    if (!/^[A-Za-z0-9]+$/.test(name)) problems.push(`${where}: logical ID must be alphanumeric`);
    for (const k of Object.keys(r || {})) if (!RESOURCE_KEYS.has(k)) problems.push(`${where}: unknown attribute ${k}`);
    const rs = spec.ResourceTypes[r?.Type];
    if (!rs) {
      problems.push(`${where}: unknown resource type ${r?.Type}`);
      continue;
    }
    if (r.Condition && !(r.Condition in conditions)) problems.push(`${where}: unknown condition ${r.Condition}`);
    for (const d of [].concat(r.DependsOn || [])) if (!(d in resources)) problems.push(`${where}: DependsOn ${d}: no such resource`);
    checkProps(r.Properties || {}, rs.Properties || {}, r.Type, where + '.Properties', ctx);
    checkRefs(r.Properties || {}, where + '.Properties', ctx);
    if (r.Type === 'AWS::CloudWatch::Alarm') {
      const props = resolveSubs(r.Properties || {}, params);
      problems.push(...checkAlarm(props).map((p) => `${where}: ${p}`));
    }
  }
  for (const [name, o] of Object.entries(outputs)) checkRefs(o, `Outputs.${name}`, ctx);
  return problems;
}

function checkProps(obj, props, rtype, where, ctx) {
  if (isIntrinsic(obj)) return;
  if (!obj || typeof obj !== 'object' || Array.isArray(obj)) {
    ctx.problems.push(`${where}: want an object, got ${JSON.stringify(obj)}`);
    return;
  }
  for (const [k, v] of Object.entries(obj)) {
    const ps = props[k];
    if (!ps) {
      ctx.problems.push(`${where}: unknown property ${k}`);
      continue;
    }
    checkValue(v, ps, rtype, `${where}.${k}`, ctx);
  }
  for (const [k, ps] of Object.entries(props)) if (ps.Required && !(k in obj)) ctx.problems.push(`${where}: required property ${k} missing`);
}

function checkValue(v, ps, rtype, where, ctx) {
  if (isIntrinsic(v)) return;
  if (ps.PrimitiveType) return checkPrimitive(v, ps.PrimitiveType, where, ctx);
  if (ps.Type === 'List' || ps.Type === 'Map') {
    const items = ps.Type === 'List' ? v : v && typeof v === 'object' && !Array.isArray(v) ? Object.values(v) : null;
    if (!Array.isArray(items)) return ctx.problems.push(`${where}: want a ${ps.Type}, got ${JSON.stringify(v)}`);
    items.forEach((x, i) => {
      const w = `${where}[${i}]`;
      if (ps.PrimitiveItemType) checkValue(x, { PrimitiveType: ps.PrimitiveItemType }, rtype, w, ctx);
      else checkValue(x, { Type: ps.ItemType }, rtype, w, ctx);
    });
    return;
  }
  const pt = spec.PropertyTypes[`${rtype}.${ps.Type}`] || spec.PropertyTypes[ps.Type];
  if (!pt) return ctx.problems.push(`${where}: the specification has no type ${ps.Type}`);
  checkProps(v, pt.Properties || {}, rtype, where, ctx);
}

function checkPrimitive(v, type, where, ctx) {
  const ok = {
    String: () => ['string', 'number', 'boolean'].includes(typeof v),
    Integer: () => Number.isInteger(Number(v)) && v !== '' && typeof v !== 'boolean',
    Long: () => Number.isInteger(Number(v)) && v !== '' && typeof v !== 'boolean',
    Double: () => !Number.isNaN(Number(v)) && v !== '' && typeof v !== 'boolean',
    Boolean: () => typeof v === 'boolean' || v === 'true' || v === 'false',
    Json: () => typeof v === 'object' || typeof v === 'string',
    Timestamp: () => typeof v === 'string',
  }[type];
  if (!ok) return ctx.problems.push(`${where}: unknown primitive type ${type}`);
  if (!ok()) ctx.problems.push(`${where}: want ${type}, got ${JSON.stringify(v)}`);
}

// checkRefs: every Ref, Fn::GetAtt, Fn::Sub variable and Fn::If condition resolves.
function checkRefs(v, where, ctx) {
  if (Array.isArray(v)) return v.forEach((x, i) => checkRefs(x, `${where}[${i}]`, ctx));
  if (!v || typeof v !== 'object') return;
  for (const [k, x] of Object.entries(v)) {
    if ((k === 'Ref' || k.startsWith('Fn::')) && Object.keys(v).length === 1 && !INTRINSICS.has(k)) {
      ctx.problems.push(`${where}: unknown intrinsic function ${k}`);
    }
    if (k === 'Ref' && Object.keys(v).length === 1) {
      if (typeof x !== 'string' || !(x in ctx.params || x in ctx.resources || PSEUDO.has(x))) {
        ctx.problems.push(`${where}: Ref ${JSON.stringify(x)}: no such parameter or resource`);
      }
    } else if (k === 'Fn::GetAtt') {
      checkGetAtt(x, where, ctx);
    } else if (k === 'Fn::If' || k === 'Condition') {
      const c = k === 'Fn::If' ? x?.[0] : x;
      if (typeof c === 'string' && !(c in ctx.conditions)) ctx.problems.push(`${where}: unknown condition ${c}`);
    } else if (k === 'Fn::Sub') {
      const [str, vars] = Array.isArray(x) ? x : [x, {}];
      if (typeof str !== 'string') ctx.problems.push(`${where}: Fn::Sub takes a string or [string, {variables}]`);
      else {
        for (const m of str.matchAll(/\$\{([^!}][^}]*)\}/g)) {
          const name = m[1].trim();
          if (vars && name in vars) continue;
          if (name.includes('.')) checkGetAtt(name.split('.'), where, ctx, true);
          else if (!(name in ctx.params || name in ctx.resources || PSEUDO.has(name))) {
            ctx.problems.push(`${where}: Fn::Sub variable \${${name}}: no such parameter or resource`);
          }
        }
      }
    }
    checkRefs(x, `${where}.${k}`, ctx);
  }
}

function checkGetAtt(x, where, ctx) {
  const [res, ...rest] = Array.isArray(x) ? x : String(x).split('.');
  const r = ctx.resources[res];
  if (!r) return ctx.problems.push(`${where}: Fn::GetAtt ${res}: no such resource`);
  const attrs = spec.ResourceTypes[r.Type]?.Attributes || {};
  const attr = rest.join('.');
  if (!(attr in attrs)) ctx.problems.push(`${where}: Fn::GetAtt ${res}.${attr}: ${r.Type} has no such attribute`);
}

// subWith is a Fn::Sub string with the template's parameters (their
// defaults, or the parameter's name) and pseudo parameters substituted as
// CloudFormation would.
const subWith = (str, params) => str.replace(/\$\{([^!}][^}]*)\}/g, (_, v) =>
  v === 'AWS::Region' ? 'us-east-1' : String(params[v]?.Default || v));

function resolveSubs(v, params) {
  if (Array.isArray(v)) return v.map((x) => resolveSubs(x, params));
  if (!v || typeof v !== 'object') return v;
  if (Object.keys(v).length === 1 && typeof v['Fn::Sub'] === 'string') return subWith(v['Fn::Sub'], params);
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, resolveSubs(x, params)]));
}

// The dashboard body of each AWS::CloudWatch::Dashboard, with the template's
// parameters (their defaults, or the parameter's name) and pseudo parameters
// substituted as CloudFormation would.
export function dashboardBodies(tmpl) {
  const params = tmpl.Parameters || {};
  const out = [];
  for (const [name, r] of Object.entries(tmpl.Resources || {})) {
    if (r?.Type !== 'AWS::CloudWatch::Dashboard') continue;
    let body = r.Properties?.DashboardBody;
    if (body && typeof body === 'object' && 'Fn::Sub' in body) {
      body = subWith([].concat(body['Fn::Sub'])[0], params);
    }
    out.push({ name, body });
  }
  return out;
}

export function checkFile(path) {
  return checkTemplate(loadTemplate(fs.readFileSync(path, 'utf8')));
}
