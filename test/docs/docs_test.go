// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package docs_test checks what the project's Markdown promises a reader
// can follow: every test a document names as evidence exists, every
// relative link (and its #anchor) leads somewhere, docs/layout.md and
// docs/architecture.md name every folder and every component of this
// repository.
package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
)

// skippedDirs hold no documentation of this project: installed tools,
// build outputs, npm packages.
var skippedDirs = []string{".git", ".tools", "bin", "node_modules"}

// walk calls f for every file under the repository whose name ends in ext.
func walk(t *testing.T, ext string, f func(path string, text string)) {
	t.Helper()
	root := binarytest.RepoRoot()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && slices.Contains(skippedDirs, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ext) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f(path, string(b))
		return nil
	})
	require.NoError(t, err)
}

// citedTest is a test, fuzz target or benchmark named in backquotes, with
// an optional subtest path or a trailing * for a family of tests.
var citedTest = regexp.MustCompile("`((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]*)(\\*|/[^`]*)?`")

// definedTest is a top-level test function.
var definedTest = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]*)\(`)

func TestDocumentsNameTestsThatExist(t *testing.T) {
	defined := map[string]bool{}
	walk(t, "_test.go", func(_ string, text string) {
		for _, m := range definedTest.FindAllStringSubmatch(text, -1) {
			defined[m[1]] = true
		}
	})
	require.Contains(t, defined, "TestDocumentsNameTestsThatExist", "the walk found no tests")

	cited := 0
	walk(t, ".md", func(path string, text string) {
		for _, m := range citedTest.FindAllStringSubmatch(text, -1) {
			cited++
			name, family := m[1], m[2] == "*"
			found := defined[name]
			if family {
				for d := range defined {
					found = found || strings.HasPrefix(d, name)
				}
			}
			if !found {
				t.Errorf("%s names %s, which no _test.go file defines", rel(path), m[0])
			}
		}
	})
	require.Greater(t, cited, 100, "the documents cite tests as evidence; the pattern found too few")
}

// link is an inline Markdown link or image whose target is not a URL.
var link = regexp.MustCompile(`\]\(([^)\s]*)\)`)

var heading = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*$`)

func TestDocumentLinksResolve(t *testing.T) {
	texts := map[string]string{}
	anchors := map[string]map[string]bool{}
	walk(t, ".md", func(path string, text string) {
		texts[path], anchors[path] = text, headingAnchors(text)
	})
	for path, text := range texts {
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			dest := path
			if file != "" {
				dest = filepath.Join(filepath.Dir(path), file)
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s links to %s, which does not exist", rel(path), target)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			if !anchors[dest][anchor] {
				t.Errorf("%s links to %s: %s has no heading with that anchor", rel(path), target, rel(dest))
			}
		}
	}
}

func TestHeadingAnchorsAreGitHubs(t *testing.T) {
	got := headingAnchors("# What the counts survive\n## `make bench-peers`: side by side\n### Cumulative -> delta (state)\n")
	require.Equal(t, map[string]bool{
		"what-the-counts-survive":       true,
		"make-bench-peers-side-by-side": true,
		"cumulative---delta-state":      true,
	}, got)
}

// headingAnchors are the anchors GitHub gives a document's headings:
// lower case, punctuation other than - and _ removed, spaces as hyphens.
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(text, -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		anchors[b.String()] = true
	}
	return anchors
}

func rel(path string) string {
	r, err := filepath.Rel(binarytest.RepoRoot(), path)
	if err != nil {
		return path
	}
	return r
}
