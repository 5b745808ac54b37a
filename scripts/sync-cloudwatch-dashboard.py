#!/usr/bin/python3
"""Copies deploy/cloudwatch/dashboard.json into the DashboardBody of
deploy/cloudwatch/gpubuild-cloudwatch.yaml, with the namespace and region
as the template's ${Namespace} and ${AWS::Region}. Edit dashboard.json,
then run this; test/dashboards fails while the two differ."""

import json
import pathlib
import re

root = pathlib.Path(__file__).resolve().parent.parent
dashboard = json.loads((root / "deploy/cloudwatch/dashboard.json").read_text())
text = json.dumps(dashboard, indent=1, ensure_ascii=False)
if "${" in text:
    raise SystemExit("dashboard.json holds '${', which Fn::Sub would read as a variable")
text = text.replace("GPUIndexBuild", "${Namespace}").replace('"region": "us-east-1"', '"region": "${AWS::Region}"')
body = "\n".join("          " + line for line in text.splitlines())

template = root / "deploy/cloudwatch/gpubuild-cloudwatch.yaml"
src = template.read_text()
pattern = re.compile(r"(      DashboardBody:\n        Fn::Sub: \|\n)(?:          .*\n)+")
if not pattern.search(src):
    raise SystemExit("no DashboardBody block scalar found in " + str(template))
template.write_text(pattern.sub(lambda m: m.group(1) + body + "\n", src, count=1))
