// Checks Kubernetes manifests against the OpenAPI schema of the Kubernetes
// version kubernetes-models was generated from (package.json pins it): each
// YAML document's apiVersion and kind pick the model, whose validate()
// throws on a missing, misnamed or mistyped field.
import fs from 'node:fs';
import yaml from 'js-yaml';
import { typeOf, unknownFields } from './k8sfields.mjs';

// kubernetes-models' module of each API group version the manifests use.
const GROUPS = {
  v1: 'kubernetes-models/v1',
  'apps/v1': 'kubernetes-models/apps/v1',
  'autoscaling/v2': 'kubernetes-models/autoscaling/v2',
  'policy/v1': 'kubernetes-models/policy/v1',
  'batch/v1': 'kubernetes-models/batch/v1',
  'networking.k8s.io/v1': 'kubernetes-models/networking.k8s.io/v1',
  'rbac.authorization.k8s.io/v1': 'kubernetes-models/rbac.authorization.k8s.io/v1',
};

export async function checkFile(path) {
  const problems = [];
  const docs = yaml.loadAll(fs.readFileSync(path, 'utf8')).filter((d) => d != null);
  if (docs.length === 0) problems.push('no Kubernetes objects');
  for (const [i, doc] of docs.entries()) {
    const where = `document ${i + 1} (${doc?.kind ?? '?'} ${doc?.metadata?.name ?? ''})`;
    const mod = GROUPS[doc?.apiVersion];
    if (!mod) {
      problems.push(`${where}: apiVersion ${doc?.apiVersion} is not one this checker knows`);
      continue;
    }
    const Model = (await import(mod))[doc.kind];
    if (typeof Model !== 'function') {
      problems.push(`${where}: ${doc.apiVersion} has no kind ${doc.kind}`);
      continue;
    }
    const type = typeOf(doc.apiVersion, doc.kind);
    if (!type) problems.push(`${where}: no type declaration of ${doc.apiVersion} ${doc.kind}`);
    else for (const u of unknownFields(doc, type)) problems.push(`${where}: ${u}`);
    try {
      new Model(doc).validate();
    } catch (err) {
      const details = (err.errors || []).map((e) => `${e.instancePath || '/'}: ${e.message}` +
        (e.params?.additionalProperty ? ` (${e.params.additionalProperty})` : ''));
      problems.push(`${where}: ${details.length ? details.join('; ') : err.message}`);
    }
  }
  return problems;
}
