// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package destinations

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

type envReader func(string) (string, bool)

func (e envReader) get(name, def string) string {
	if v, ok := e(name); ok && strings.TrimSpace(v) != "" {
		return strings.TrimSpace(v)
	}
	return def
}

func (e envReader) positiveInt(name, def string) (int, error) {
	v := e.get(name, def)
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s: %q is not a positive integer", name, v)
	}
	return n, nil
}

func (e envReader) port(name, def string) (int, error) {
	v := e.get(name, def)
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("%s: %q is not a TCP port (accepted: 1-65535)", name, v)
	}
	return n, nil
}

func (e envReader) duration(name, def string) (string, error) {
	v := e.get(name, def)
	if _, err := time.ParseDuration(v); err != nil {
		return "", fmt.Errorf("%s: %q is not a duration (e.g. 30m, 1h)", name, v)
	}
	return v, nil
}

func (e envReader) boolean(name, def string) (*bool, error) {
	v := e.get(name, def)
	if v == "" {
		return nil, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %q is not a boolean (accepted: true, false)", name, v)
	}
	return &b, nil
}

func componentType(id string) string {
	typ, _, _ := strings.Cut(id, "/")
	return typ
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func asList(v any) []any {
	l, _ := v.([]any)
	return slices.Clone(l)
}

func cloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
