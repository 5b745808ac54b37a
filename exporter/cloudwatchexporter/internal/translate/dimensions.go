// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package translate // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Dimension is one CloudWatch dimension, already within CloudWatch's limits.
type Dimension struct {
	Name, Value string
}

// dimensionFilter is the include/exclude part of a metric rule.
type dimensionFilter struct {
	include, exclude []string
}

func (f *dimensionFilter) allows(name string) bool {
	if len(f.include) > 0 {
		return slices.Contains(f.include, name)
	}
	return !slices.Contains(f.exclude, name)
}

// alteration says how a data point's name or dimensions were changed to
// what CloudWatch accepts; a bit per alterReason.
type alteration uint8

// sanitized adds reason r when s changed to out, dropped when !ok.
func (a *alteration) note(s, out string, ok bool) {
	switch {
	case !ok:
		*a |= 1 << alterDimensionDropped
	case out != s:
		*a |= 1 << alterDimension
	}
}

// resourceDimensions returns the listed resource attributes as dimensions,
// in the order they are listed, skipping absent or unusable ones, and how
// they were altered.
func resourceDimensions(dst []Dimension, res pcommon.Resource, keys []string) ([]Dimension, alteration) {
	attrs := res.Attributes()
	start := len(dst)
	var alt alteration
	for _, key := range keys {
		v, ok := attrs.Get(key)
		if !ok {
			continue
		}
		raw := attributeString(v)
		name, okName := sanitizeDimensionName(key)
		value, okValue := sanitizeDimensionValue(raw)
		alt.note(key, name, okName)
		alt.note(raw, value, okValue)
		if okName && okValue && !hasDimension(dst[start:], name) {
			dst = append(dst, Dimension{name, value})
		}
	}
	return dst, alt
}

// appendDimensions appends the dimensions of one data point to dst: the
// resource dimensions, then the point's attributes (a point attribute
// replaces a resource dimension of the same name), filtered by the metric's
// rule. Beyond 30, the point attributes with the smallest names are kept, so
// the same attributes always give the same dimensions. The appended part is
// sorted by name.
func appendDimensions(dst, resDims []Dimension, attrs pcommon.Map, filter *dimensionFilter) ([]Dimension, alteration) {
	start := len(dst)
	var alt alteration
	for _, d := range resDims {
		if filter.allows(d.Name) {
			dst = append(dst, d)
		}
	}
	nRes := len(dst) - start
	for k, v := range attrs.All() {
		name, ok := sanitizeDimensionName(k)
		if !ok || !filter.allows(name) {
			if !ok {
				alt.note(k, name, ok)
			}
			continue
		}
		alt.note(k, name, ok)
		raw := attributeString(v)
		value, ok := sanitizeDimensionValue(raw)
		alt.note(raw, value, ok)
		if i := indexDimension(dst[start:], name); i >= 0 {
			if i < nRes && ok {
				dst[start+i].Value = value // the point attribute is more specific
			}
			continue
		}
		if ok {
			dst = append(dst, Dimension{name, value})
		}
	}
	own := dst[start:]
	if len(own) > maxDimensions {
		sortDimensions(own[nRes:])
		dst = dst[:start+maxDimensions]
		own = dst[start:]
	}
	sortDimensions(own)
	return dst, alt
}

// sortDimensions sorts by name; insertion sort because the lists are short
// and it does not allocate.
func sortDimensions(d []Dimension) {
	for i := 1; i < len(d); i++ {
		for j := i; j > 0 && d[j].Name < d[j-1].Name; j-- {
			d[j], d[j-1] = d[j-1], d[j]
		}
	}
}

func indexDimension(d []Dimension, name string) int {
	for i := range d {
		if d[i].Name == name {
			return i
		}
	}
	return -1
}

func hasDimension(d []Dimension, name string) bool { return indexDimension(d, name) >= 0 }

// sanitizeDimensionName makes a dimension name CloudWatch accepts: printable
// ASCII (anything else becomes '_'), at most 255 characters, not starting
// with ':' and not blank. ok is false when nothing usable is left.
func sanitizeDimensionName(s string) (string, bool) {
	if isCleanASCII(s, maxDimNameLen) && s[0] != ':' {
		return s, true
	}
	out := cleanASCII(s, maxDimNameLen)
	if strings.HasPrefix(out, ":") {
		out = "_" + out[1:]
	}
	return out, !isBlank(out)
}

// sanitizeDimensionValue is sanitizeDimensionName for values (at most 1024 characters).
func sanitizeDimensionValue(s string) (string, bool) {
	if isCleanASCII(s, maxDimValueLen) {
		return s, true
	}
	out := cleanASCII(s, maxDimValueLen)
	return out, !isBlank(out)
}

// sanitizeMetricName replaces control characters and invalid UTF-8 with '_'
// (CloudWatch refuses the whole request for one such name) and cuts the name
// to 255 bytes on a character boundary. CloudWatch does not restrict metric
// names to ASCII. ok is false for a blank name.
func sanitizeMetricName(s string) (string, bool) {
	if !utf8.ValidString(s) || hasControl(s) {
		var b strings.Builder
		b.Grow(len(s))
		for _, r := range s { // invalid bytes come as utf8.RuneError
			if r == utf8.RuneError || r < 0x20 || (r >= 0x7f && r <= 0x9f) {
				r = '_'
			}
			b.WriteRune(r)
		}
		s = b.String()
	}
	if len(s) > MaxMetricNameLen {
		cut := MaxMetricNameLen
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return s, !isBlank(s)
}

// isCleanASCII reports whether s is non-blank printable ASCII of at most maxLen bytes.
func isCleanASCII(s string, maxLen int) bool {
	if len(s) == 0 || len(s) > maxLen {
		return false
	}
	blank := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e {
			return false
		}
		if c != ' ' {
			blank = false
		}
	}
	return !blank
}

// cleanASCII replaces every character that is not printable ASCII with '_'
// and cuts the result to maxLen bytes.
func cleanASCII(s string, maxLen int) string {
	var b strings.Builder
	b.Grow(min(len(s), maxLen))
	for _, r := range s {
		if b.Len() >= maxLen {
			break
		}
		if r >= 0x20 && r <= 0x7e {
			b.WriteByte(byte(r))
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// hasControl reports whether s holds an ASCII or C1 control character.
func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return true
		}
	}
	return false
}

func isBlank(s string) bool {
	return strings.TrimSpace(s) == ""
}

// smallInts holds the decimal strings of 0..255 so that integer attributes
// such as gpu.index do not allocate.
var smallInts = func() [256]string {
	var a [256]string
	for i := range a {
		a[i] = strconv.Itoa(i)
	}
	return a
}()

// attributeString renders an attribute value as a dimension value.
func attributeString(v pcommon.Value) string {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return v.Str()
	case pcommon.ValueTypeInt:
		if i := v.Int(); i >= 0 && i < int64(len(smallInts)) {
			return smallInts[i]
		}
		return strconv.FormatInt(v.Int(), 10)
	case pcommon.ValueTypeBool:
		return strconv.FormatBool(v.Bool())
	case pcommon.ValueTypeEmpty:
		return ""
	default:
		return v.AsString()
	}
}
