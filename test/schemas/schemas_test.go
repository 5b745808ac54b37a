// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package schemas checks deploy/ against what AWS and Kubernetes accept:
// the CloudFormation template against the CloudFormation resource
// specification (Fn::ForEach expanded first), its alarms against
// PutMetricAlarm's rules and the metric math, SEARCH and Metrics Insights
// syntax, the CloudWatch dashboard bodies against CloudWatch's dashboard
// body structure, the Kubernetes manifests against the Kubernetes OpenAPI
// schema of kubernetes-models' pinned release, strictly (unknown fields are
// errors), the Grafana dashboards against @grafana/schema's declarations of
// Grafana's schema (the dashboard, panels, and each panel plugin's options),
// and the PromQL alarms' PutMetricAlarm requests against the AWS
// SDK's CloudWatch model. The checkers of the first three are Node.js
// (check.mjs) on the npm packages pinned in package-lock.json
// (`make schemas-deps`).
package schemas

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
)

// check runs check.mjs KIND on files; it returns the output and whether it
// reported problems.
func check(t *testing.T, kind string, files ...string) (string, bool) {
	t.Helper()
	dir := filepath.Join(binarytest.RepoRoot(), "test", "schemas")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "kubernetes-models")); err != nil {
		t.Fatalf("test/schemas/node_modules missing: run `make schemas-deps` (npm ci; `make test` runs it)")
	}
	cmd := exec.Command("node", append([]string{"check.mjs", kind}, files...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 1 {
		return string(out), true
	}
	require.NoError(t, err, "node check.mjs %s: %s", kind, out)
	return string(out), false
}

func deployFile(rel string) string { return filepath.Join(binarytest.RepoRoot(), "deploy", rel) }

// deployed is every file of deploy/ each checker covers.
func deployed(t *testing.T) map[string][]string {
	t.Helper()
	k8s, err := filepath.Glob(deployFile("kubernetes/*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, k8s)
	grafana, err := filepath.Glob(deployFile("grafana/*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, grafana)
	return map[string][]string{
		"grafana":    grafana,
		"cfn":        {deployFile("cloudwatch/gpubuild-cloudwatch.yaml")},
		"dashboard":  {deployFile("cloudwatch/dashboard.json")},
		"kubernetes": append(k8s, deployFile("gateway-kubernetes.yaml")),
	}
}

// TestDeployAgainstSchemas: every template, dashboard body and manifest in
// deploy/ passes its checker.
func TestDeployAgainstSchemas(t *testing.T) {
	for kind, files := range deployed(t) {
		t.Run(kind, func(t *testing.T) {
			out, failed := check(t, kind, files...)
			assert.False(t, failed, "%s", out)
			for _, f := range files {
				assert.Contains(t, out, f+": ok")
			}
		})
	}
}

// TestCheckersReportBrokenInputs feeds each checker a copy of a deployed
// file with one field misnamed (or one reference broken) and requires the
// checker to name it.
func TestCheckersReportBrokenInputs(t *testing.T) {
	cases := []struct {
		name, kind, file, old, new string
		want                       []string
	}{
		{"alarm property", "cfn", "cloudwatch/gpubuild-cloudwatch.yaml", "ComparisonOperator:", "ComparisonOperater:",
			[]string{"unknown property ComparisonOperater", "required property ComparisonOperator missing"}},
		{"property inside Fn::ForEach", "cfn", "cloudwatch/gpubuild-cloudwatch.yaml", "MetricName: build.job.duration", "MetricNme: build.job.duration",
			[]string{"Resources.BuildP99Alarm", "unknown property MetricNme"}},
		{"metric query property", "cfn", "cloudwatch/gpubuild-cloudwatch.yaml", "ReturnData: true", "ReturnDta: true",
			[]string{"unknown property ReturnDta"}},
		{"resource type", "cfn", "cloudwatch/gpubuild-cloudwatch.yaml", "Type: AWS::CloudWatch::Dashboard", "Type: AWS::CloudWatch::Dashbord",
			[]string{"unknown resource type AWS::CloudWatch::Dashbord"}},
		{"Ref", "cfn", "cloudwatch/gpubuild-cloudwatch.yaml", `{"Ref": AlarmTopicArn}`, `{"Ref": AlarmTopicArm}`,
			[]string{`Ref "AlarmTopicArm": no such parameter or resource`}},
		{"dashboard body in the template", "cfn", "cloudwatch/gpubuild-cloudwatch.yaml", `"view":`, `"veiw":`,
			[]string{"DashboardBody", "(veiw)"}},
		{"alarm math refers to an id no query has", "cfn", "cloudwatch/gpubuild-cloudwatch.yaml", "IF(ended >= ", "IF(endd >= ",
			[]string{"expression refers to endd, which no query has as its id"}},
		{"two alarm results", "cfn", "cloudwatch/gpubuild-cloudwatch.yaml", "ReturnData: false", "ReturnData: true",
			[]string{"want exactly one Metrics entry with ReturnData true"}},
		{"Metrics Insights function", "cfn", "cloudwatch/gpubuild-cloudwatch.yaml", "SELECT SUM(", "SELECT TOTAL(",
			[]string{`not a Metrics Insights query`, `SELECT TOTAL("build.jobs")`}},
		{"Metrics Insights comparison", "cfn", "cloudwatch/gpubuild-cloudwatch.yaml", `WHERE \"build.result\" = 'success'`, `WHERE \"build.result\" == 'success'`,
			[]string{`WHERE: want "dimension" = 'value' comparisons`}},
		{"Metrics Insights limit", "cfn", "cloudwatch/gpubuild-cloudwatch.yaml", "LIMIT 500", "LIMIT 501",
			[]string{"LIMIT 501: at most 500 series"}},
		{"text widget", "dashboard", "cloudwatch/dashboard.json", `"markdown":`, `"markdwn":`,
			[]string{"(markdwn)", "required property 'markdown'"}},
		{"metric widget", "dashboard", "cloudwatch/dashboard.json", `"region":`, `"regoin":`,
			[]string{"(regoin)", "required property 'region'"}},
		{"rendering property", "dashboard", "cloudwatch/dashboard.json", `"label":`, `"lable":`,
			[]string{"metrics/0/0: must NOT have additional properties (lable)"}},
		{"dashboard math refers to an id no query has", "dashboard", "cloudwatch/dashboard.json", "SUM(ok) / SUM(all)", "SUM(ok) / SUM(al)",
			[]string{"expression refers to al, which no query has as its id"}},
		{"SEARCH statistic", "dashboard", "cloudwatch/dashboard.json", "', 'Sum', 300)", "', 'Summ', 300)",
			[]string{"SEARCH statistic Summ is not a CloudWatch statistic"}},
		{"Grafana dashboard field", "grafana", "grafana/gpubuild-dashboard.json", `"graphTooltip"`, `"graphToolTip"`,
			[]string{"/: unknown field graphToolTip"}},
		{"Grafana panel field", "grafana", "grafana/gpubuild-dashboard.json", `"gridPos"`, `"gridPosition"`,
			[]string{"unknown field gridPosition"}},
		{"Grafana panel type", "grafana", "grafana/gpubuild-dashboard.json", `"type": "timeseries"`, `"type": "timeserie"`,
			[]string{"panel type timeserie is not one of Grafana's"}},
		{"Grafana panel options", "grafana", "grafana/gpubuild-dashboard.json", `"displayMode"`, `"displayMod"`,
			[]string{"options.legend: unknown field displayMod"}},
		{"Grafana field config", "grafana", "grafana/gpubuild-dashboard.json", `"unit"`, `"units"`,
			[]string{"fieldConfig.defaults: unknown field units"}},
		{"probe field", "kubernetes", "kubernetes/pod.yaml", "periodSeconds:", "periodSecond:",
			[]string{"unknown field periodSecond"}},
		{"container port", "kubernetes", "kubernetes/pod.yaml", "containerPort:", "containerPrt:",
			[]string{"unknown field containerPrt"}},
		{"claim retention", "kubernetes", "gateway-kubernetes.yaml", "persistentVolumeClaimRetentionPolicy:", "persistentVolumeClaimRetentionPolcy:",
			[]string{"unknown field persistentVolumeClaimRetentionPolcy"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := os.ReadFile(deployFile(tc.file))
			require.NoError(t, err)
			require.Contains(t, string(b), tc.old, "deploy/%s no longer has what this case breaks", tc.file)
			broken := filepath.Join(t.TempDir(), filepath.Base(tc.file))
			require.NoError(t, os.WriteFile(broken, []byte(strings.Replace(string(b), tc.old, tc.new, 1)), 0o644))
			out, failed := check(t, tc.kind, broken)
			require.True(t, failed, "the checker passed a broken copy:\n%s", out)
			for _, w := range tc.want {
				assert.Contains(t, out, w)
			}
		})
	}
}
