// Usage: node check.mjs KIND FILE...
//   cfn         CloudFormation templates (and the dashboard bodies in them)
//   dashboard   CloudWatch dashboard bodies (JSON files)
//   kubernetes  Kubernetes manifests (YAML, several documents each)
//   grafana     Grafana dashboards (JSON)
// Prints one line per problem, FILE: problem, and exits 1 when there is one.
import fs from 'node:fs';
import * as cfn from './cfn.mjs';
import { checkBody } from './dashboard.mjs';
import * as grafana from './grafana.mjs';
import * as kubernetes from './kubernetes.mjs';

const [kind, ...files] = process.argv.slice(2);
const checks = {
  cfn: (f) => {
    const tmpl = cfn.loadTemplate(fs.readFileSync(f, 'utf8'));
    const out = cfn.checkTemplate(tmpl);
    for (const { name, body } of cfn.dashboardBodies(tmpl)) {
      out.push(...checkBody(body).map((p) => `Resources.${name}.Properties.DashboardBody: ${p}`));
    }
    return out;
  },
  dashboard: (f) => checkBody(fs.readFileSync(f, 'utf8')),
  kubernetes: (f) => kubernetes.checkFile(f),
  grafana: (f) => grafana.checkFile(f),
};
if (!checks[kind] || files.length === 0) {
  console.error(`usage: node check.mjs ${Object.keys(checks).join('|')} FILE...`);
  process.exit(2);
}
let failed = false;
for (const f of files) {
  let problems;
  try {
    problems = await checks[kind](f);
  } catch (err) {
    problems = [`cannot check: ${err.message}`];
  }
  for (const p of problems) console.log(`${f}: ${p}`);
  failed ||= problems.length > 0;
  if (problems.length === 0) console.log(`${f}: ok`);
}
process.exit(failed ? 1 : 0);
