// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter"

import (
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
)

// unitConversion is the CloudWatch unit of a metric and the factor its values
// are multiplied by to be expressed in that unit. CloudWatch has no unit for
// nanoseconds, minutes or hours, so those are scaled to one it has.
type unitConversion struct {
	unit  unitID
	scale float64
}

// ucumUnits maps the UCUM units OpenTelemetry instrumentation uses to
// CloudWatch units. Kilo/kibi prefixes both map to CloudWatch's single
// Kilobytes (CloudWatch does not say which one it means; it only labels).
var ucumUnits = map[string]unitConversion{
	"ns":  {unitIDOf(types.StandardUnitMicroseconds), 1e-3},
	"us":  {unitIDOf(types.StandardUnitMicroseconds), 1},
	"µs":  {unitIDOf(types.StandardUnitMicroseconds), 1},
	"ms":  {unitIDOf(types.StandardUnitMilliseconds), 1},
	"s":   {unitIDOf(types.StandardUnitSeconds), 1},
	"min": {unitIDOf(types.StandardUnitSeconds), 60},
	"h":   {unitIDOf(types.StandardUnitSeconds), 3600},
	"d":   {unitIDOf(types.StandardUnitSeconds), 86400},

	"By":   {unitIDOf(types.StandardUnitBytes), 1},
	"kBy":  {unitIDOf(types.StandardUnitKilobytes), 1},
	"KBy":  {unitIDOf(types.StandardUnitKilobytes), 1},
	"KiBy": {unitIDOf(types.StandardUnitKilobytes), 1},
	"MBy":  {unitIDOf(types.StandardUnitMegabytes), 1},
	"MiBy": {unitIDOf(types.StandardUnitMegabytes), 1},
	"GBy":  {unitIDOf(types.StandardUnitGigabytes), 1},
	"GiBy": {unitIDOf(types.StandardUnitGigabytes), 1},
	"TBy":  {unitIDOf(types.StandardUnitTerabytes), 1},
	"TiBy": {unitIDOf(types.StandardUnitTerabytes), 1},

	"bit":   {unitIDOf(types.StandardUnitBits), 1},
	"kbit":  {unitIDOf(types.StandardUnitKilobits), 1},
	"Kibit": {unitIDOf(types.StandardUnitKilobits), 1},
	"Mbit":  {unitIDOf(types.StandardUnitMegabits), 1},
	"Mibit": {unitIDOf(types.StandardUnitMegabits), 1},
	"Gbit":  {unitIDOf(types.StandardUnitGigabits), 1},
	"Gibit": {unitIDOf(types.StandardUnitGigabits), 1},
	"Tbit":  {unitIDOf(types.StandardUnitTerabits), 1},
	"Tibit": {unitIDOf(types.StandardUnitTerabits), 1},

	"By/s":    {unitIDOf(types.StandardUnitBytesSecond), 1},
	"kBy/s":   {unitIDOf(types.StandardUnitKilobytesSecond), 1},
	"KiBy/s":  {unitIDOf(types.StandardUnitKilobytesSecond), 1},
	"MBy/s":   {unitIDOf(types.StandardUnitMegabytesSecond), 1},
	"MiBy/s":  {unitIDOf(types.StandardUnitMegabytesSecond), 1},
	"GBy/s":   {unitIDOf(types.StandardUnitGigabytesSecond), 1},
	"GiBy/s":  {unitIDOf(types.StandardUnitGigabytesSecond), 1},
	"TBy/s":   {unitIDOf(types.StandardUnitTerabytesSecond), 1},
	"TiBy/s":  {unitIDOf(types.StandardUnitTerabytesSecond), 1},
	"bit/s":   {unitIDOf(types.StandardUnitBitsSecond), 1},
	"kbit/s":  {unitIDOf(types.StandardUnitKilobitsSecond), 1},
	"Kibit/s": {unitIDOf(types.StandardUnitKilobitsSecond), 1},
	"Mbit/s":  {unitIDOf(types.StandardUnitMegabitsSecond), 1},
	"Mibit/s": {unitIDOf(types.StandardUnitMegabitsSecond), 1},
	"Gbit/s":  {unitIDOf(types.StandardUnitGigabitsSecond), 1},
	"Gibit/s": {unitIDOf(types.StandardUnitGigabitsSecond), 1},
	"Tbit/s":  {unitIDOf(types.StandardUnitTerabitsSecond), 1},
	"Tibit/s": {unitIDOf(types.StandardUnitTerabitsSecond), 1},

	"%": {unitIDOf(types.StandardUnitPercent), 1},
	// "1" is the UCUM unit of dimensionless ratios (utilization 0..1), not of counts.
	"1": {unitIDOf(types.StandardUnitNone), 1},
	"":  {unitIDOf(types.StandardUnitNone), 1},
}

// mapUnit returns the CloudWatch unit for a UCUM unit. Annotations such as
// {request} or {packet} are counts, and {request}/s is Count/Second.
// Anything else is sent as None rather than guessed.
func mapUnit(ucum string) unitConversion {
	if u, ok := ucumUnits[ucum]; ok {
		return u
	}
	if isAnnotation(ucum) {
		return unitConversion{unitIDOf(types.StandardUnitCount), 1}
	}
	if rate, ok := strings.CutSuffix(ucum, "/s"); ok && isAnnotation(rate) {
		return unitConversion{unitIDOf(types.StandardUnitCountSecond), 1}
	}
	return unitConversion{unitIDOf(types.StandardUnitNone), 1}
}

// isAnnotation reports whether u is a single UCUM curly-brace annotation, e.g. {request}.
func isAnnotation(u string) bool {
	return len(u) >= 2 && u[0] == '{' && u[len(u)-1] == '}' && !strings.ContainsAny(u[1:len(u)-1], "{}")
}

// unitID is a CloudWatch unit in one byte, for datum: 0 is no unit, i+1 is
// standardUnits[i].
type unitID uint8

// standardUnits are the units CloudWatch knows, as the SDK lists them.
var standardUnits = types.StandardUnit("").Values()

// unitIDOf is u's unitID; 0 for a unit CloudWatch does not know (config
// validation and mapUnit admit none).
func unitIDOf(u types.StandardUnit) unitID {
	if i := slices.Index(standardUnits, u); i >= 0 {
		return unitID(i + 1)
	}
	return 0
}

// standard is the unit as CloudWatch names it, "" for none.
func (u unitID) standard() types.StandardUnit {
	if u == 0 {
		return ""
	}
	return standardUnits[u-1]
}
