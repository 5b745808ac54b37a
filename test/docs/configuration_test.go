// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
)

// envVar is a GPUBUILD_ variable name, not the tail of a longer name.
var envVar = regexp.MustCompile(`\bGPUBUILD_[A-Z0-9_]*[A-Z0-9]\b`)

// shippedConfigs are the configurations the image ships.
var shippedConfigs = []string{"otelcol-config.yaml", "otelcol-gateway.yaml"}

// codeDirs hold the Go code and the embedded pipeline YAML of the binary
// and its commands; their tests and test data read variables of their own.
var codeDirs = []string{"cmd", "connector", "exporter", "extension", "internal", "processor", "receiver"}

// usedVariables are the GPUBUILD_ variables the shipped configurations and
// the code (tests, test data and test support aside) name.
func usedVariables(t *testing.T) map[string][]string {
	t.Helper()
	root := binarytest.RepoRoot()
	used := map[string][]string{}
	add := func(path string) {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		for _, v := range envVar.FindAllString(string(b), -1) {
			if !slices.Contains(used[v], rel(path)) {
				used[v] = append(used[v], rel(path))
			}
		}
	}
	for _, c := range shippedConfigs {
		add(filepath.Join(root, c))
	}
	for _, dir := range codeDirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" || d.Name() == "testing" && filepath.Base(filepath.Dir(path)) == "internal" || slices.Contains(skippedDirs, d.Name()) {
					return filepath.SkipDir
				}
				return nil
			}
			name := d.Name()
			if strings.HasSuffix(name, "_test.go") || !strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, ".yaml") {
				return nil
			}
			add(path)
			return nil
		})
		require.NoError(t, err)
	}
	return used
}

// documentedVariables are the GPUBUILD_ variables in the first column of
// docs/configuration.md's tables.
func documentedVariables(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(binarytest.RepoRoot(), "docs", "configuration.md"))
	require.NoError(t, err)
	documented := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || strings.TrimSpace(cells[0]) != "" {
			continue
		}
		for _, v := range envVar.FindAllString(cells[1], -1) {
			documented[v] = true
		}
	}
	return documented
}

func TestConfigurationDocumentsEveryVariable(t *testing.T) {
	used := usedVariables(t)
	documented := documentedVariables(t)
	require.Contains(t, used, "GPUBUILD_QUEUE_DIR", "the scan found no variable in the shipped config")
	require.Contains(t, used, "GPUBUILD_DESTINATIONS", "the scan found no variable in the code")
	require.Contains(t, documented, "GPUBUILD_QUEUE_DIR", "docs/configuration.md has no variable table the scan can read")

	for v, files := range used {
		assert.True(t, documented[v], "%s is read by %s but docs/configuration.md's tables do not list it", v, strings.Join(files, ", "))
	}
	for v := range documented {
		assert.NotEmpty(t, used[v], "docs/configuration.md lists %s, which no shipped config or code reads", v)
	}
}
