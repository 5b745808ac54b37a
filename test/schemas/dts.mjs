// Field names from TypeScript declarations (.d.ts) generated from a schema:
// kubernetes-models' (Kubernetes OpenAPI) and @grafana/schema's (Grafana's
// CUE schema). A Namespace holds one set of interfaces; unknownFields walks
// a value along a declared type and lists the fields the type does not have.
import fs from 'node:fs';
import path from 'node:path';

export function* declarations(dir) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) yield* declarations(p);
    else if (e.name.endsWith('.d.ts')) yield [p, fs.readFileSync(p, 'utf8')];
  }
}

// The text between the '{' at i and its matching '}'.
function block(text, i) {
  let depth = 0;
  for (let j = i; j < text.length; j++) {
    if (text[j] === '{') depth++;
    else if (text[j] === '}' && --depth === 0) return text.slice(i + 1, j);
  }
  return text.slice(i + 1);
}

// properties splits an interface body into name -> type text.
function properties(body) {
  const out = new Map();
  const re = /(?:"([^"]+)"|([A-Za-z_$][\w$]*))\??:\s*/g;
  let m;
  while ((m = re.exec(body)) !== null) {
    let depth = 0;
    let j = re.lastIndex;
    for (; j < body.length; j++) {
      const c = body[j];
      if ('{<(['.includes(c)) depth++;
      else if ('}>)]'.includes(c)) depth--;
      else if (c === ';' && depth === 0) break;
    }
    out.set(m[1] ?? m[2], body.slice(re.lastIndex, j).trim());
    re.lastIndex = j + 1;
  }
  return out;
}

// interfaces parses a declaration file: name -> {fields, parents}.
export function interfaces(raw) {
  const text = raw.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
  const out = new Map();
  for (const m of text.matchAll(/export interface (\w+)(?:<[^>]*>)?(?: extends ([^{]+))?\s*\{/g)) {
    const parents = (m[2] || '').split(',').map((s) => s.trim()).filter(Boolean);
    out.set(m[1], { fields: properties(block(text, m.index + m[0].length - 1)), parents });
  }
  return out;
}

// Namespace: interfaces by name, with resolve(name) for other namespaces'
// names (qualified, common.X); fields(name) includes the parents' fields,
// or is null when a parent cannot be resolved (then nothing is unknown).
export class Namespace {
  constructor(resolve = () => undefined) {
    this.types = new Map();
    this.resolve = resolve;
  }

  add(map) {
    for (const [k, v] of map) this.types.set(k, v);
    return this;
  }

  fields(name, seen = new Set()) {
    const t = this.types.get(name);
    if (!t) {
      const other = this.resolve(name);
      return other ? other.ns.fields(other.name, seen) : null;
    }
    if (seen.has(name)) return new Map();
    seen.add(name);
    const all = new Map(t.fields);
    for (const p of t.parents) {
      const pf = this.fields(p.replace(/<.*$/, ''), seen);
      if (pf === null) return null;
      for (const [k, v] of pf) if (!all.has(k)) all.set(k, v);
    }
    return all;
  }

  has(name) {
    return this.types.has(name) || Boolean(this.resolve(name));
  }
}

// splitUnion splits "(A | B)" or "A | B" at the top level.
function splitUnion(type) {
  let t = type.trim();
  if (t.startsWith('(') && t.endsWith(')')) t = t.slice(1, -1);
  const parts = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < t.length; i++) {
    const c = t[i];
    if ('{<(['.includes(c)) depth++;
    else if ('}>)]'.includes(c)) depth--;
    else if (c === '|' && depth === 0) {
      parts.push(t.slice(start, i).trim());
      start = i + 1;
    }
  }
  parts.push(t.slice(start).trim());
  return parts;
}

// unknownFields walks value along type in ns; hook(where, value, type) may
// return problems of its own for a value (undefined: walk on).
export function unknownFields(ns, value, type, where = '', hook = () => undefined) {
  const own = hook(where, value, type);
  if (own !== undefined) return own;
  type = type.trim();
  let m;
  if ((m = /^Array<(.+)>$/s.exec(type)) || (m = /^(\w+)\[\]$/.exec(type))) {
    if (!Array.isArray(value)) return [];
    return value.flatMap((v, i) => unknownFields(ns, v, m[1], `${where}[${i}]`, hook));
  }
  if ((m = /^\{\s*\[key: string\]:\s*(.+?);?\s*\}$/s.exec(type)) || (m = /^Record<string,\s*(.+)>$/s.exec(type))) {
    if (!value || typeof value !== 'object') return [];
    return Object.entries(value).flatMap(([k, v]) => unknownFields(ns, v, m[1], `${where}.${k}`, hook));
  }
  const union = splitUnion(type).filter((t) => /^[\w.]+$/.test(t) && ns.has(t));
  if (union.length > 1 && value && typeof value === 'object' && !Array.isArray(value)) {
    // A value of a union matches one member: report the closest member's.
    const tries = union.map((t) => unknownFields(ns, value, t, where, hook));
    return tries.find((p) => p.length === 0) ?? tries.sort((a, b) => a.length - b.length)[0];
  }
  if (!/^[\w.]+$/.test(type) || !value || typeof value !== 'object' || Array.isArray(value)) return [];
  const fields = ns.fields(type);
  if (!fields) return [];
  const out = [];
  for (const [k, v] of Object.entries(value)) {
    if (!fields.has(k)) out.push(`${where || '/'}: unknown field ${k}`);
    else out.push(...unknownFields(ns, v, fields.get(k), `${where}.${k}`, hook));
  }
  return out;
}
