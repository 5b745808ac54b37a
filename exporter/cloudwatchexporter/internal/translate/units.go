// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package translate // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"

import (
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
)

// unitConversion is the CloudWatch unit of a metric and the factor its values
// are multiplied by to be expressed in that unit. CloudWatch has no unit for
// nanoseconds, minutes or hours, so those are scaled to one it has.
type unitConversion struct {
	unit  UnitID
	scale float64
}

// ucumUnits maps the UCUM units OpenTelemetry instrumentation uses to
// CloudWatch units. Kilo/kibi prefixes both map to CloudWatch's single
// Kilobytes (CloudWatch does not say which one it means; it only labels).
var ucumUnits = map[string]unitConversion{
	"ns":  {UnitIDOf(types.StandardUnitMicroseconds), 1e-3},
	"us":  {UnitIDOf(types.StandardUnitMicroseconds), 1},
	"µs":  {UnitIDOf(types.StandardUnitMicroseconds), 1},
	"ms":  {UnitIDOf(types.StandardUnitMilliseconds), 1},
	"s":   {UnitIDOf(types.StandardUnitSeconds), 1},
	"min": {UnitIDOf(types.StandardUnitSeconds), 60},
	"h":   {UnitIDOf(types.StandardUnitSeconds), 3600},
	"d":   {UnitIDOf(types.StandardUnitSeconds), 86400},

	"By":   {UnitIDOf(types.StandardUnitBytes), 1},
	"kBy":  {UnitIDOf(types.StandardUnitKilobytes), 1},
	"KBy":  {UnitIDOf(types.StandardUnitKilobytes), 1},
	"KiBy": {UnitIDOf(types.StandardUnitKilobytes), 1},
	"MBy":  {UnitIDOf(types.StandardUnitMegabytes), 1},
	"MiBy": {UnitIDOf(types.StandardUnitMegabytes), 1},
	"GBy":  {UnitIDOf(types.StandardUnitGigabytes), 1},
	"GiBy": {UnitIDOf(types.StandardUnitGigabytes), 1},
	"TBy":  {UnitIDOf(types.StandardUnitTerabytes), 1},
	"TiBy": {UnitIDOf(types.StandardUnitTerabytes), 1},

	"bit":   {UnitIDOf(types.StandardUnitBits), 1},
	"kbit":  {UnitIDOf(types.StandardUnitKilobits), 1},
	"Kibit": {UnitIDOf(types.StandardUnitKilobits), 1},
	"Mbit":  {UnitIDOf(types.StandardUnitMegabits), 1},
	"Mibit": {UnitIDOf(types.StandardUnitMegabits), 1},
	"Gbit":  {UnitIDOf(types.StandardUnitGigabits), 1},
	"Gibit": {UnitIDOf(types.StandardUnitGigabits), 1},
	"Tbit":  {UnitIDOf(types.StandardUnitTerabits), 1},
	"Tibit": {UnitIDOf(types.StandardUnitTerabits), 1},

	"By/s":    {UnitIDOf(types.StandardUnitBytesSecond), 1},
	"kBy/s":   {UnitIDOf(types.StandardUnitKilobytesSecond), 1},
	"KiBy/s":  {UnitIDOf(types.StandardUnitKilobytesSecond), 1},
	"MBy/s":   {UnitIDOf(types.StandardUnitMegabytesSecond), 1},
	"MiBy/s":  {UnitIDOf(types.StandardUnitMegabytesSecond), 1},
	"GBy/s":   {UnitIDOf(types.StandardUnitGigabytesSecond), 1},
	"GiBy/s":  {UnitIDOf(types.StandardUnitGigabytesSecond), 1},
	"TBy/s":   {UnitIDOf(types.StandardUnitTerabytesSecond), 1},
	"TiBy/s":  {UnitIDOf(types.StandardUnitTerabytesSecond), 1},
	"bit/s":   {UnitIDOf(types.StandardUnitBitsSecond), 1},
	"kbit/s":  {UnitIDOf(types.StandardUnitKilobitsSecond), 1},
	"Kibit/s": {UnitIDOf(types.StandardUnitKilobitsSecond), 1},
	"Mbit/s":  {UnitIDOf(types.StandardUnitMegabitsSecond), 1},
	"Mibit/s": {UnitIDOf(types.StandardUnitMegabitsSecond), 1},
	"Gbit/s":  {UnitIDOf(types.StandardUnitGigabitsSecond), 1},
	"Gibit/s": {UnitIDOf(types.StandardUnitGigabitsSecond), 1},
	"Tbit/s":  {UnitIDOf(types.StandardUnitTerabitsSecond), 1},
	"Tibit/s": {UnitIDOf(types.StandardUnitTerabitsSecond), 1},

	"%": {UnitIDOf(types.StandardUnitPercent), 1},
	// "1" is the UCUM unit of dimensionless ratios (utilization 0..1), not of counts.
	"1": {UnitIDOf(types.StandardUnitNone), 1},
	"":  {UnitIDOf(types.StandardUnitNone), 1},
}

// mapUnit returns the CloudWatch unit for a UCUM unit. Annotations such as
// {request} or {packet} are counts, and {request}/s is Count/Second.
// Anything else is sent as None rather than guessed.
func mapUnit(ucum string) unitConversion {
	if u, ok := ucumUnits[ucum]; ok {
		return u
	}
	if isAnnotation(ucum) {
		return unitConversion{UnitIDOf(types.StandardUnitCount), 1}
	}
	if rate, ok := strings.CutSuffix(ucum, "/s"); ok && isAnnotation(rate) {
		return unitConversion{UnitIDOf(types.StandardUnitCountSecond), 1}
	}
	return unitConversion{UnitIDOf(types.StandardUnitNone), 1}
}

// isAnnotation reports whether u is a single UCUM curly-brace annotation, e.g. {request}.
func isAnnotation(u string) bool {
	return len(u) >= 2 && u[0] == '{' && u[len(u)-1] == '}' && !strings.ContainsAny(u[1:len(u)-1], "{}")
}

// UnitID is a CloudWatch unit in one byte, for datum: 0 is no unit, i+1 is
// standardUnits[i].
type UnitID uint8

// standardUnits are the units CloudWatch knows, as the SDK lists them.
var standardUnits = types.StandardUnit("").Values()

// UnitIDOf is u's unitID; 0 for a unit CloudWatch does not know (config
// validation and mapUnit admit none).
func UnitIDOf(u types.StandardUnit) UnitID {
	if i := slices.Index(standardUnits, u); i >= 0 {
		return UnitID(i + 1)
	}
	return 0
}

// standard is the unit as CloudWatch names it, "" for none.
func (u UnitID) standard() types.StandardUnit {
	if u == 0 {
		return ""
	}
	return standardUnits[u-1]
}
