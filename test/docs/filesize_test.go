// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package docs_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
)

// maxGoFileLines keeps each hand-written Go file readable in one sitting:
// a file past it mixes concerns that belong in files (or packages) of their
// own. Generated code (mdatagen's, ocb's) is exempt.
const maxGoFileLines = 500

func TestGoFilesStayShort(t *testing.T) {
	root := binarytest.RepoRoot()
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasPrefix(d.Name(), "generated_") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte("\n// Code generated ")) || bytes.HasPrefix(b, []byte("// Code generated ")) {
			return nil
		}
		checked++
		lines := bytes.Count(b, []byte("\n"))
		rel, _ := filepath.Rel(root, path)
		assert.LessOrEqual(t, lines, maxGoFileLines, "%s has %d lines: split it by concern", rel, lines)
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, checked, 100, "the walk found almost no Go files")
}
