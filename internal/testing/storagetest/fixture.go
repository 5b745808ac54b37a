// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package storagetest // import "github.com/gpubuild/otelcol-gpubuild/internal/testing/storagetest"

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ReadEntries reads a storage fixture: one entry a line, its quoted key, a
// space and its value in hex; blank lines and lines starting with # are
// skipped. The persisted-state fixtures are committed in this form.
func ReadEntries(path string) (map[string][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	out := map[string][]byte{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			return nil, fmt.Errorf("%s: no value after the key: %q", path, line)
		}
		key, err := strconv.Unquote(k)
		if err != nil {
			return nil, fmt.Errorf("%s: key %s: %w", path, k, err)
		}
		if out[key], err = hex.DecodeString(v); err != nil {
			return nil, fmt.Errorf("%s: value of %q: %w", path, key, err)
		}
	}
	return out, sc.Err()
}
