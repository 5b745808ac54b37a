// Checks a Grafana dashboard's JSON model against Grafana's schema as
// @grafana/schema publishes it (TypeScript declarations generated from
// Grafana's CUE schema; npm has no JSON Schema of it): the dashboard, its
// panels and rows, and each panel's options and custom field config against
// its panel plugin's declared types.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import * as dts from './dts.mjs';

const require = createRequire(import.meta.url);
const types = path.join(path.dirname(require.resolve('@grafana/schema/package.json')), 'dist', 'types');

const load = (ns, dir) => {
  for (const [, text] of dts.declarations(dir)) ns.add(dts.interfaces(text));
  return ns;
};
const common = load(new dts.Namespace(), path.join(types, 'common'));
const qualified = (name) => (name.startsWith('common.') ? { ns: common, name: name.slice(7) } : undefined);
const dashboard = load(new dts.Namespace(qualified), path.join(types, 'raw', 'dashboard', 'x'));
// Each panel plugin's Options and FieldConfig, by panel type.
const panels = new Map();
for (const e of fs.readdirSync(path.join(types, 'raw', 'composable'), { withFileTypes: true })) {
  const dir = path.join(types, 'raw', 'composable', e.name, 'panelcfg', 'x');
  if (e.isDirectory() && fs.existsSync(dir)) panels.set(e.name, load(new dts.Namespace(qualified), dir));
}

export function checkDashboard(d) {
  const problems = [];
  if (!d || typeof d !== 'object' || Array.isArray(d)) return ['not a dashboard object'];
  // Grafana's own panel types: a plugin's panels are not checked here.
  const hook = (where, value, type) => {
    if (type !== 'Panel' || !value || typeof value !== 'object') return undefined;
    const out = dts.unknownFields(dashboard, value, 'Panel', where, (w, v, t) => (w === where ? undefined : hook(w, v, t)));
    const plugin = panels.get(value.type === 'timeseries' ? 'timeseries' : value.type);
    if (!plugin) {
      out.push(`${where}: panel type ${value.type} is not one of Grafana's (${[...panels.keys()].join(', ')}, row)`);
      return out;
    }
    if (value.options) out.push(...dts.unknownFields(plugin, value.options, 'Options', `${where}.options`));
    const custom = value.fieldConfig?.defaults?.custom;
    if (custom && plugin.has('FieldConfig')) out.push(...dts.unknownFields(plugin, custom, 'FieldConfig', `${where}.fieldConfig.defaults.custom`));
    return out;
  };
  problems.push(...dts.unknownFields(dashboard, d, 'Dashboard', '', hook));
  return problems;
}

export function checkFile(f) {
  return checkDashboard(JSON.parse(fs.readFileSync(f, 'utf8')));
}
