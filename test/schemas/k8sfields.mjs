// Field names of the Kubernetes API types, read from the type declarations
// kubernetes-models ships (generated from the same OpenAPI schema as its
// validators, which accept unknown fields): unknownFields lists the fields
// of an object that its type does not have, as `kubectl --validate=strict`
// and the API server's strict field validation report them.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const roots = ['kubernetes-models', '@kubernetes-models/apimachinery'].map((p) =>
  path.dirname(require.resolve(`${p}/package.json`)));

function* declarations(dir) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) yield* declarations(p);
    else if (e.name.endsWith('.d.ts')) yield [p, fs.readFileSync(p, 'utf8')];
  }
}

// The text from open (a '{' at i) to its matching '}'.
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
  const re = /"([^"]+)"\??:\s*/g;
  let m;
  while ((m = re.exec(body)) !== null) {
    let depth = 0;
    let j = re.lastIndex;
    for (; j < body.length; j++) {
      const c = body[j];
      if (c === '{' || c === '<' || c === '(') depth++;
      else if (c === '}' || c === '>' || c === ')') depth--;
      else if (c === ';' && depth === 0) break;
    }
    out.set(m[1], body.slice(re.lastIndex, j).trim());
    re.lastIndex = j + 1;
  }
  return out;
}

// Interfaces by their qualified names (IIoK8sApiCoreV1PodSpec): the
// declared names (IPodSpec) repeat across API versions. byFile: the
// qualified name of each file's interface.
const interfaces = new Map();
const byFile = new Map();
for (const root of roots) {
  for (const [file, raw] of declarations(root)) {
    const text = raw.replace(/\/\*[\s\S]*?\*\//g, '');
    const local = new Map();
    for (const m of text.matchAll(/export interface (\w+)(?: extends [^{]+)?\s*\{/g)) {
      const fields = properties(block(text, m.index + m[0].length - 1));
      if (/extends TypeMeta/.test(m[0])) {
        fields.set('apiVersion', 'string');
        fields.set('kind', 'string');
      }
      local.set(m[1], fields);
    }
    for (const m of text.matchAll(/export type \{([^}]*)\}/g)) {
      for (const pair of m[1].split(',')) {
        const [a, b] = pair.split(' as ').map((x) => x.trim());
        if (local.has(a) && b?.startsWith('I')) {
          interfaces.set(b, local.get(a));
          byFile.set(file, b);
        }
      }
    }
  }
}

const lookup = (name) => interfaces.get(name);

// unknownFields walks value as type (a type's text from the declarations).
export function unknownFields(value, type, where = '') {
  const out = [];
  type = type.trim();
  let m;
  if ((m = /^Array<(.+)>$/s.exec(type))) {
    if (Array.isArray(value)) value.forEach((v, i) => out.push(...unknownFields(v, m[1], `${where}[${i}]`)));
    return out;
  }
  if ((m = /^\{\s*\[key: string\]:\s*(.+?);?\s*\}$/s.exec(type))) {
    if (value && typeof value === 'object') {
      for (const [k, v] of Object.entries(value)) out.push(...unknownFields(v, m[1], `${where}.${k}`));
    }
    return out;
  }
  const fields = /^\w+$/.test(type) ? lookup(type) : undefined;
  if (!fields || !value || typeof value !== 'object' || Array.isArray(value)) return out;
  for (const [k, v] of Object.entries(value)) {
    if (!fields.has(k)) out.push(`${where || '/'}: unknown field ${k}`);
    else out.push(...unknownFields(v, fields.get(k), `${where}.${k}`));
  }
  return out;
}

// typeOf is the qualified type name of a kind of an API group version
// (kubernetes-models/<apiVersion>/<kind>.d.ts); undefined when unknown.
export const typeOf = (apiVersion, kind) => byFile.get(path.join(roots[0], apiVersion, `${kind}.d.ts`));
