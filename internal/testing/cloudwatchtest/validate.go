// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchtest // import "github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/smithy-go/encoding/cbor"
)

// CloudWatch's documented PutMetricData limits, as this server enforces them.
const (
	MaxRequestBytes   = 1_000_000 // "1 MB"; the stricter decimal reading
	MaxDatums         = 1000
	MaxValuesPerDatum = 150
	MaxDimensions     = 30
	MaxDimensionName  = 255
	MaxDimensionValue = 1024
	MaxMetricName     = 255
	MaxNamespace      = 255
	MaxAge            = 14 * 24 * time.Hour
	MaxFuture         = 2 * time.Hour
)

// CloudWatch rejects values with a magnitude above 2^360 or, unless zero, below 2^-360.
var (
	maxMagnitude = math.Ldexp(1, 360)
	minMagnitude = math.Ldexp(1, -360)
)

// Error shapes, with the awsQuery error codes the SDK reports for them.
const (
	typeInvalidParameterValue       = "com.amazonaws.cloudwatch#InvalidParameterValueException"
	typeInvalidParameterCombination = "com.amazonaws.cloudwatch#InvalidParameterCombinationException"
	typeMissingParameter            = "com.amazonaws.cloudwatch#MissingRequiredParameterException"
)

// isStandardUnit reports whether u is in CloudWatch's StandardUnit enum.
func isStandardUnit(u string) bool {
	return slices.Contains(types.StandardUnit("").Values(), types.StandardUnit(u))
}

type apiError struct {
	status  int
	code    string // the awsQuery code, e.g. InvalidParameterValue
	typ     string // the shape in __type
	message string
}

func invalidValue(format string, args ...any) *apiError {
	return &apiError{http.StatusBadRequest, "InvalidParameterValue", typeInvalidParameterValue, fmt.Sprintf(format, args...)}
}

func invalidCombination(format string, args ...any) *apiError {
	return &apiError{http.StatusBadRequest, "InvalidParameterCombination", typeInvalidParameterCombination, fmt.Sprintf(format, args...)}
}

func missing(param string) *apiError {
	return &apiError{http.StatusBadRequest, "MissingParameter", typeMissingParameter, "The parameter " + param + " is required."}
}

// decodePutMetricData decodes a PutMetricDataInput and checks it against
// CloudWatch's limits. Like CloudWatch, one bad datum rejects the whole request.
func decodePutMetricData(body []byte, now time.Time) ([]Datum, *apiError) {
	v, err := cbor.Decode(body)
	if err != nil {
		return nil, &apiError{http.StatusBadRequest, "SerializationException", "SerializationException", "cannot decode CBOR body: " + err.Error()}
	}
	in, ok := v.(cbor.Map)
	if !ok {
		return nil, &apiError{http.StatusBadRequest, "SerializationException", "SerializationException", "the body is not a CBOR map"}
	}
	ns, ok := in["Namespace"].(cbor.String)
	if !ok {
		return nil, missing("Namespace")
	}
	namespace := string(ns)
	switch {
	case len(namespace) == 0 || len(namespace) > MaxNamespace:
		return nil, invalidValue("The parameter Namespace must be between 1 and %d characters long.", MaxNamespace)
	case strings.HasPrefix(namespace, ":") || strings.HasPrefix(namespace, "AWS/"):
		return nil, invalidValue("The value %s for parameter Namespace is invalid.", namespace)
	case !printableASCII(namespace):
		return nil, invalidValue("The parameter Namespace must contain only printable ASCII characters.")
	}
	list, ok := in["MetricData"].(cbor.List)
	if !ok || len(list) == 0 {
		return nil, missing("MetricData")
	}
	if len(list) > MaxDatums {
		return nil, invalidValue("The collection MetricData must not have a size greater than %d.", MaxDatums)
	}
	datums := make([]Datum, 0, len(list))
	for i, item := range list {
		m, ok := item.(cbor.Map)
		if !ok {
			return nil, invalidValue("MetricData.member.%d is not a structure.", i+1)
		}
		d, apiErr := decodeDatum(m, fmt.Sprintf("MetricData.member.%d", i+1), now)
		if apiErr != nil {
			return nil, apiErr
		}
		d.Namespace = namespace
		datums = append(datums, d)
	}
	return datums, nil
}

func decodeDatum(m cbor.Map, p string, now time.Time) (Datum, *apiError) {
	var d Datum
	name, ok := m["MetricName"].(cbor.String)
	if !ok {
		return d, missing(p + ".MetricName")
	}
	if len(name) == 0 || len(name) > MaxMetricName {
		return d, invalidValue("The parameter %s.MetricName must be between 1 and %d characters long.", p, MaxMetricName)
	}
	if !utf8.ValidString(string(name)) || hasControl(string(name)) || blank(string(name)) {
		return d, invalidValue("The parameter %s.MetricName must not contain control characters, invalid UTF-8 or only whitespace.", p)
	}
	d.MetricName = string(name)

	if raw, present := m["Dimensions"]; present {
		dims, ok := raw.(cbor.List)
		if !ok {
			return d, invalidValue("The parameter %s.Dimensions must be a list.", p)
		}
		if len(dims) > MaxDimensions {
			return d, invalidValue("The collection %s.Dimensions must not have a size greater than %d.", p, MaxDimensions)
		}
		d.Dimensions = make(map[string]string, len(dims))
		for j, raw := range dims {
			dp := fmt.Sprintf("%s.Dimensions.member.%d", p, j+1)
			dm, ok := raw.(cbor.Map)
			if !ok {
				return d, invalidValue("The parameter %s must be a structure.", dp)
			}
			n, okName := dm["Name"].(cbor.String)
			v, okValue := dm["Value"].(cbor.String)
			switch {
			case !okName:
				return d, missing(dp + ".Name")
			case !okValue:
				return d, missing(dp + ".Value")
			case len(n) == 0 || len(n) > MaxDimensionName || !printableASCII(string(n)) || blank(string(n)) || n[0] == ':':
				return d, invalidValue("The value %q for parameter %s.Name is invalid.", string(n), dp)
			case len(v) == 0 || len(v) > MaxDimensionValue || !printableASCII(string(v)) || blank(string(v)):
				return d, invalidValue("The value %q for parameter %s.Value is invalid.", string(v), dp)
			}
			if _, dup := d.Dimensions[string(n)]; dup {
				return d, invalidValue("The dimension name %s is repeated in %s.Dimensions.", string(n), p)
			}
			d.Dimensions[string(n)] = string(v)
		}
	}

	if raw, present := m["Timestamp"]; present {
		t, apiErr := decodeTime(raw, p+".Timestamp")
		if apiErr != nil {
			return d, apiErr
		}
		switch {
		case t.Before(now.Add(-MaxAge)):
			return d, invalidValue("The parameter %s.Timestamp must specify a time no more than two weeks in the past.", p)
		case t.After(now.Add(MaxFuture)):
			return d, invalidValue("The parameter %s.Timestamp must specify a time no more than two hours in the future.", p)
		}
		d.Timestamp = t
	} else {
		d.Timestamp = now.Truncate(time.Millisecond)
	}

	if raw, present := m["Unit"]; present {
		u, ok := raw.(cbor.String)
		if !ok || !isStandardUnit(string(u)) {
			return d, invalidValue("The value %v for parameter %s.Unit is invalid.", raw, p)
		}
		d.Unit = string(u)
	}

	d.StorageResolution = 60
	if raw, present := m["StorageResolution"]; present {
		r, err := cbor.AsInt32(raw)
		if err != nil || (r != 1 && r != 60) {
			return d, invalidValue("The value %v for parameter %s.StorageResolution is invalid: valid values are 1 and 60.", raw, p)
		}
		d.StorageResolution = r
	}

	_, hasValue := m["Value"]
	_, hasStats := m["StatisticValues"]
	_, hasValues := m["Values"]
	switch {
	case hasValue && hasStats:
		return d, invalidCombination("The parameters %s.Value and %s.StatisticValues are mutually exclusive and you have specified both.", p, p)
	case hasValue && hasValues:
		return d, invalidCombination("The parameters %s.Value and %s.Values are mutually exclusive and you have specified both.", p, p)
	case hasStats && hasValues:
		return d, invalidCombination("The parameters %s.StatisticValues and %s.Values are mutually exclusive and you have specified both.", p, p)
	case hasValue:
		v, apiErr := decodeNumber(m["Value"], p+".Value")
		if apiErr != nil {
			return d, apiErr
		}
		d.Value = &v
	case hasStats:
		st, apiErr := decodeStatistics(m["StatisticValues"], p+".StatisticValues")
		if apiErr != nil {
			return d, apiErr
		}
		d.Statistics = st
	case hasValues:
		values, counts, apiErr := decodeDistribution(m, p)
		if apiErr != nil {
			return d, apiErr
		}
		d.Values, d.Counts = values, counts
	default:
		return d, missing(p + ".Value")
	}
	if _, present := m["Counts"]; present && !hasValues {
		return d, invalidCombination("The parameter %s.Counts needs %s.Values.", p, p)
	}
	return d, nil
}

func decodeStatistics(raw cbor.Value, p string) (*StatisticSet, *apiError) {
	sm, ok := raw.(cbor.Map)
	if !ok {
		return nil, invalidValue("The parameter %s must be a structure.", p)
	}
	var st StatisticSet
	for _, f := range []struct {
		name string
		dst  *float64
	}{{"SampleCount", &st.SampleCount}, {"Sum", &st.Sum}, {"Minimum", &st.Minimum}, {"Maximum", &st.Maximum}} {
		v, present := sm[f.name]
		if !present {
			return nil, missing(p + "." + f.name)
		}
		x, apiErr := decodeNumber(v, p+"."+f.name)
		if apiErr != nil {
			return nil, apiErr
		}
		*f.dst = x
	}
	if st.SampleCount <= 0 {
		return nil, invalidValue("The parameter %s.SampleCount must be greater than 0.", p)
	}
	if st.Minimum > st.Maximum {
		return nil, invalidValue("The parameter %s.Minimum must not be greater than %s.Maximum.", p, p)
	}
	return &st, nil
}

func decodeDistribution(m cbor.Map, p string) ([]float64, []float64, *apiError) {
	rawValues, ok := m["Values"].(cbor.List)
	if !ok || len(rawValues) == 0 {
		return nil, nil, invalidValue("The parameter %s.Values must be a non-empty list.", p)
	}
	if len(rawValues) > MaxValuesPerDatum {
		return nil, nil, invalidValue("The collection %s.Values must not have a size greater than %d.", p, MaxValuesPerDatum)
	}
	values := make([]float64, len(rawValues))
	seen := make(map[float64]bool, len(rawValues))
	for i, raw := range rawValues {
		v, apiErr := decodeNumber(raw, fmt.Sprintf("%s.Values.member.%d", p, i+1))
		if apiErr != nil {
			return nil, nil, apiErr
		}
		if seen[v] {
			return nil, nil, invalidValue("The value %v appears more than once in %s.Values.", v, p)
		}
		seen[v] = true
		values[i] = v
	}
	counts := make([]float64, len(values))
	rawCounts, present := m["Counts"]
	if !present {
		for i := range counts {
			counts[i] = 1
		}
		return values, counts, nil
	}
	cl, ok := rawCounts.(cbor.List)
	if !ok || len(cl) != len(values) {
		return nil, nil, invalidValue("The parameters %s.Values and %s.Counts must be of the same size.", p, p)
	}
	for i, raw := range cl {
		c, apiErr := decodeNumber(raw, fmt.Sprintf("%s.Counts.member.%d", p, i+1))
		if apiErr != nil {
			return nil, nil, apiErr
		}
		if c < 0 {
			return nil, nil, invalidValue("The value %v for parameter %s.Counts.member.%d must not be negative.", c, p, i+1)
		}
		counts[i] = c
	}
	return values, counts, nil
}

// decodeNumber reads a double and applies CloudWatch's range.
func decodeNumber(raw cbor.Value, p string) (float64, *apiError) {
	v, err := cbor.AsFloat64(raw)
	if err != nil {
		return 0, invalidValue("The parameter %s must be a number.", p)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, invalidValue("The value %v for parameter %s is invalid.", v, p)
	}
	if a := math.Abs(v); v != 0 && (a > maxMagnitude || a < minMagnitude) {
		return 0, invalidValue("The value %v for parameter %s is out of range.", v, p)
	}
	return v, nil
}

// decodeTime reads a timestamp (tag 1, epoch seconds) to millisecond precision.
func decodeTime(raw cbor.Value, p string) (time.Time, *apiError) {
	tag, ok := raw.(*cbor.Tag)
	if !ok || tag.ID != 1 {
		return time.Time{}, invalidValue("The parameter %s must be a timestamp.", p)
	}
	secs, err := cbor.AsFloat64(tag.Value)
	if err != nil || math.IsNaN(secs) || math.IsInf(secs, 0) {
		return time.Time{}, invalidValue("The parameter %s must be a timestamp.", p)
	}
	return time.UnixMilli(int64(math.Round(secs * 1e3))).UTC(), nil
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func blank(s string) bool { return strings.TrimSpace(s) == "" }

// hasControl reports whether s holds an ASCII or C1 control character.
func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return true
		}
	}
	return false
}
