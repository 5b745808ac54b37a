// Field names of the Kubernetes API types, read from the type declarations
// kubernetes-models ships (generated from the same OpenAPI schema as its
// validators, which accept unknown fields): unknownFields lists the fields
// of an object that its type does not have, as `kubectl --validate=strict`
// and the API server's strict field validation report them.
import path from 'node:path';
import { createRequire } from 'node:module';
import * as dts from './dts.mjs';

const require = createRequire(import.meta.url);
const roots = ['kubernetes-models', '@kubernetes-models/apimachinery'].map((p) =>
  path.dirname(require.resolve(`${p}/package.json`)));

// Interfaces by their qualified names (IIoK8sApiCoreV1PodSpec): the
// declared names (IPodSpec) repeat across API versions. byFile: the
// qualified name of each file's interface.
const ns = new dts.Namespace();
const byFile = new Map();
for (const root of roots) {
  for (const [file, text] of dts.declarations(root)) {
    const local = dts.interfaces(text);
    for (const m of text.matchAll(/export type \{([^}]*)\}/g)) {
      for (const pair of m[1].split(',')) {
        const [a, b] = pair.split(' as ').map((x) => x.trim());
        if (local.has(a) && b?.startsWith('I')) {
          const t = local.get(a);
          // TypeMeta (apiVersion, kind) is declared in @kubernetes-models/base.
          if (t.parents.includes('TypeMeta')) {
            t.fields.set('apiVersion', 'string');
            t.fields.set('kind', 'string');
            t.parents = t.parents.filter((p) => p !== 'TypeMeta');
          }
          ns.types.set(b, t);
          byFile.set(file, b);
        }
      }
    }
  }
}

// unknownFields walks value as the qualified type name.
export const unknownFields = (value, type) => dts.unknownFields(ns, value, type);

// typeOf is the qualified type name of a kind of an API group version
// (kubernetes-models/<apiVersion>/<kind>.d.ts); undefined when unknown.
export const typeOf = (apiVersion, kind) => byFile.get(path.join(roots[0], apiVersion, `${kind}.d.ts`));
