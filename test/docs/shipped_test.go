// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package docs_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
)

const module = "github.com/gpubuild/otelcol-gpubuild/"

// Which code ships is read from the path: every package under internal/ is
// in the binary, except test and tool support, which lives under
// internal/testing/ (and the pinned tool modules under internal/tools/,
// modules of their own).
func TestInternalPackagesShipUnlessUnderTesting(t *testing.T) {
	root := binarytest.RepoRoot()

	// What the binary is built from: the distribution's packages and
	// everything they import, as make build compiles them (cgo on, for NVML).
	cmd := exec.Command("go", "list", "-deps", ".")
	cmd.Dir = filepath.Join(root, "distro")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	out, err := cmd.Output()
	require.NoError(t, err, "go list -deps in distro/")
	shipped := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		if rel, ok := strings.CutPrefix(p, module); ok {
			shipped[rel] = true
		}
	}
	require.True(t, shipped["exporter/cloudwatchexporter"], "go list found none of this module's packages in the binary")

	cmd = exec.Command("go", "list", "./internal/...")
	cmd.Dir = root
	out, err = cmd.Output()
	require.NoError(t, err, "go list ./internal/...")
	packages := strings.Fields(string(out))
	require.NotEmpty(t, packages)

	for _, p := range packages {
		rel := strings.TrimPrefix(p, module)
		if strings.HasPrefix(rel, "internal/testing/") {
			assert.False(t, shipped[rel], "%s is test support but the binary imports it", rel)
			continue
		}
		assert.True(t, shipped[rel], "%s is not in the binary: test or tool support goes under internal/testing/", rel)
	}
}

// internal/ holds what the components share; a package there that imported
// a component would turn the dependency around (and link that component,
// its cgo included, into every component that uses the package).
func TestInternalPackagesImportNoComponent(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}{{range .TestImports}} {{.}}{{end}}`, "./internal/...")
	cmd.Dir = binarytest.RepoRoot()
	out, err := cmd.Output()
	require.NoError(t, err, "go list ./internal/...")
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Greater(t, len(lines), 10, "go list found almost no packages")
	for _, line := range lines {
		f := strings.Fields(line)
		for _, imp := range f[1:] {
			rel, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			for _, kind := range []string{"connector/", "processor/", "exporter/", "receiver/", "extension/"} {
				assert.False(t, strings.HasPrefix(rel, kind), "%s imports the component package %s", f[0], rel)
			}
		}
	}
}

// The buildjob processor reads no GPU: it must link no NVML binding (cgo,
// a driver library loaded at run time) into the binaries that embed it.
func TestBuildjobProcessorLinksNoNVML(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "./processor/buildjobprocessor")
	cmd.Dir = binarytest.RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	out, err := cmd.Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, module+"processor/buildjobprocessor")
	for _, d := range deps {
		assert.NotContains(t, d, "go-nvml", "the buildjob processor links %s", d)
		assert.NotContains(t, d, "nvmlapi", "the buildjob processor links %s", d)
	}
}
