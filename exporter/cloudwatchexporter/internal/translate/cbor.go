// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package translate // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"

import (
	"encoding/binary"
	"math"
)

// CBOR as smithy RPC v2 writes it: structures and lists of indefinite
// length, member names as text keys in the model's order, doubles as
// float64, timestamps as tag 1 and float64 epoch seconds to the
// millisecond. datumSize (packer.go) is the size of what appendDatum writes.
const (
	cborUint      = 0 << 5
	cborText      = 3 << 5
	cborTag       = 6 << 5
	cborFloat64   = 7<<5 | 27
	cborListStart = 4<<5 | 31
	cborMapStart  = 5<<5 | 31
	cborBreak     = 0xff
)

// AppendPutMetricData appends a PutMetricData request body.
func AppendPutMetricData(b []byte, namespace string, datums []Datum) []byte {
	b = append(b, cborMapStart)
	b = appendText(b, "MetricData")
	b = append(b, cborListStart)
	for i := range datums {
		b = AppendDatum(b, &datums[i])
	}
	b = append(b, cborBreak)
	b = appendText(b, "Namespace")
	b = appendText(b, namespace)
	return append(b, cborBreak)
}

// AppendDatum appends one MetricDatum, its members in the model's order.
func AppendDatum(b []byte, d *Datum) []byte {
	b = append(b, cborMapStart)
	if d.Kind == KindValues {
		b = appendFloatList(appendText(b, "Counts"), d.Counts())
	}
	if len(d.Dims) > 0 {
		b = appendText(b, "Dimensions")
		b = append(b, cborListStart)
		for i := range d.Dims {
			b = append(b, cborMapStart)
			b = appendText(appendText(b, "Name"), d.Dims[i].Name)
			b = appendText(appendText(b, "Value"), d.Dims[i].Value)
			b = append(b, cborBreak)
		}
		b = append(b, cborBreak)
	}
	b = appendText(appendText(b, "MetricName"), d.Name)
	if d.Kind == KindStatistics {
		st := d.Stats()
		b = appendText(b, "StatisticValues")
		b = append(b, cborMapStart)
		b = appendFloat(appendText(b, "Maximum"), st.Max)
		b = appendFloat(appendText(b, "Minimum"), st.Min)
		b = appendFloat(appendText(b, "SampleCount"), st.SampleCount)
		b = appendFloat(appendText(b, "Sum"), st.Sum)
		b = append(b, cborBreak)
	}
	b = appendArg(appendText(b, "StorageResolution"), cborUint, uint64(d.Resolution))
	b = appendText(b, "Timestamp")
	b = appendArg(b, cborTag, 1)
	b = appendFloat(b, float64(int64(d.Timestamp)/1e6)/1e3)
	if d.Unit != 0 {
		b = appendText(appendText(b, "Unit"), string(d.Unit.standard()))
	}
	if d.Kind == KindValue {
		b = appendFloat(appendText(b, "Value"), d.Value)
	}
	if d.Kind == KindValues {
		b = appendFloatList(appendText(b, "Values"), d.Values())
	}
	return append(b, cborBreak)
}

func appendFloatList(b []byte, vs []float64) []byte {
	b = append(b, cborListStart)
	for _, v := range vs {
		b = appendFloat(b, v)
	}
	return append(b, cborBreak)
}

func appendFloat(b []byte, v float64) []byte {
	b = append(b, cborFloat64)
	return binary.BigEndian.AppendUint64(b, math.Float64bits(v))
}

func appendText(b []byte, s string) []byte {
	return append(appendArg(b, cborText, uint64(len(s))), s...)
}

// appendArg appends a major type's head with its argument, shortest form.
func appendArg(b []byte, major byte, arg uint64) []byte {
	switch {
	case arg < 24:
		return append(b, major|byte(arg))
	case arg < 1<<8:
		return append(b, major|24, byte(arg))
	case arg < 1<<16:
		return binary.BigEndian.AppendUint16(append(b, major|25), uint16(arg))
	case arg < 1<<32:
		return binary.BigEndian.AppendUint32(append(b, major|26), uint32(arg))
	}
	return binary.BigEndian.AppendUint64(append(b, major|27), arg)
}
