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

// componentKinds are the folders that hold one folder per component,
// command or test; each of those is named in the layout. Every folder
// under internal/ is named too, at any depth.
var componentKinds = []string{"cmd", "connector", "exporter", "extension", "processor", "receiver", "test"}

// layoutDoc holds the repository layout block.
const layoutDoc = "docs/layout.md"

// layoutNames are the first words of the lines in the repository layout
// block of docs/layout.md, without a trailing slash.
func layoutNames(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(binarytest.RepoRoot(), layoutDoc))
	require.NoError(t, err)
	_, after, ok := strings.Cut(string(b), "\n## Repository layout\n")
	require.True(t, ok, "docs/layout.md has no Repository layout section")
	_, block, ok := strings.Cut(after, "```\n")
	require.True(t, ok, "the Repository layout section has no code block")
	block, _, ok = strings.Cut(block, "```")
	require.True(t, ok, "the Repository layout code block is not closed")
	names := map[string]bool{}
	for _, line := range strings.Split(block, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			names[strings.TrimSuffix(f[0], "/")] = true
		}
	}
	return names
}

// requiredFolders are the folders the layout must name: every top-level
// folder that is not hidden (those in componentKinds through their
// children), every child of a componentKinds folder, and every folder
// under internal/. Test data, installed packages and build outputs are not
// the project's layout.
func requiredFolders(t *testing.T) []string {
	t.Helper()
	root := binarytest.RepoRoot()
	var folders []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() || path == root {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || slices.Contains(skippedDirs, d.Name()) {
			return filepath.SkipDir
		}
		rel := filepath.ToSlash(rel(path))
		parts := strings.Split(rel, "/")
		switch {
		case parts[0] == "internal":
			if len(parts) > 1 {
				folders = append(folders, rel)
			}
		case slices.Contains(componentKinds, parts[0]):
			if len(parts) == 2 {
				folders = append(folders, rel)
			}
			if len(parts) >= 2 {
				return filepath.SkipDir
			}
		default:
			folders = append(folders, rel)
			return filepath.SkipDir
		}
		return nil
	})
	require.NoError(t, err)
	return folders
}

func TestLayoutNamesEveryFolder(t *testing.T) {
	names := layoutNames(t)
	folders := requiredFolders(t)
	require.Contains(t, folders, "exporter/cloudwatchexporter", "the walk found no component folders")
	require.Contains(t, folders, "internal/buildjob/derive", "the walk found no nested internal folders")
	for _, f := range folders {
		assert.True(t, names[f], "docs/layout.md's Repository layout does not name %s/", f)
	}
}

// localImport is a component or converter of this module in the ocb manifest.
var localImport = regexp.MustCompile(`(?m)^\s*import: github\.com/gpubuild/otelcol-gpubuild/(\S+)$`)

// Every component, extension and converter of this repository that the
// distribution is built with is named in the architecture document and in
// the README's layout.
func TestArchitectureNamesEveryLocalComponent(t *testing.T) {
	root := binarytest.RepoRoot()
	manifest, err := os.ReadFile(filepath.Join(root, "builder-config.yaml"))
	require.NoError(t, err)
	arch, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	require.NoError(t, err)
	names := layoutNames(t)

	imports := localImport.FindAllStringSubmatch(string(manifest), -1)
	require.GreaterOrEqual(t, len(imports), 11, "builder-config.yaml lists fewer local components than the five, two extensions and four converters")
	for _, m := range imports {
		assert.Contains(t, string(arch), m[1], "docs/architecture.md does not name %s", m[1])
		assert.True(t, names[m[1]], "docs/layout.md's Repository layout does not name %s", m[1])
	}
}
