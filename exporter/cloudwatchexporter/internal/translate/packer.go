// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package translate // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"

// PackedRequest is one PutMetricData request: datums[first:first+n] after pack.
type PackedRequest struct {
	First, N int
	Bytes    int // serialized CBOR body, exactly as the SDK writes it
}

// bin is a request being filled.
type bin struct {
	n, bytes int
}

// Pack orders datums into as few requests as the limits allow: at most 1000
// datums and maxRequestBytes of body each. The datums of one data point stay
// in one request (a histogram split at 150 values is several datums), so a
// failed request is retried as whole data points and an accepted datum is
// never sent twice. Groups are placed first-fit, so small points fill the
// room big ones leave. A data point too big for one request alone (over 1000
// datums or the byte limit, which takes tens of thousands of buckets) is
// split across requests.
//
// The datums are reordered in place, request after request (a copy would
// double what a flush holds while it is sent); the requests are appended
// to reqs.
func Pack(datums []Datum, namespace string, reqs []PackedRequest) []PackedRequest {
	budget := MaxRequestBytes - RequestEnvelopeSize(namespace)
	var bins []bin
	binOf := make([]int32, 0, len(datums)) // per datum: its bin, then its place
	openFrom := 0                          // bins before this are full

	for start := 0; start < len(datums); {
		end := start + 1
		size := DatumSize(&datums[start])
		for end < len(datums) && datums[end].Point == datums[start].Point {
			size += DatumSize(&datums[end])
			end++
		}
		n := end - start
		if n > MaxDatumsPerRequest || size > budget {
			// Too big for any one request: it is split anyway, so its datums
			// go one by one wherever they fit.
			for i := start; i < end; i++ {
				s := DatumSize(&datums[i])
				b := firstFit(bins, openFrom, 1, s, budget)
				if b < 0 {
					bins = append(bins, bin{})
					b = len(bins) - 1
				}
				bins[b].n++
				bins[b].bytes += s
				binOf = append(binOf, int32(b))
			}
			start = end
			continue
		}
		b := firstFit(bins, openFrom, n, size, budget)
		if b < 0 {
			bins = append(bins, bin{})
			b = len(bins) - 1
		}
		bins[b].n += n
		bins[b].bytes += size
		for range n {
			binOf = append(binOf, int32(b))
		}
		for openFrom < len(bins) && (bins[openFrom].n == MaxDatumsPerRequest || budget-bins[openFrom].bytes < minDatumSize) {
			openFrom++
		}
		start = end
	}

	// Lay the requests out one after the other, and give each datum its
	// place: after the datums placed before it in its request.
	offset := 0
	for _, b := range bins {
		reqs = append(reqs, PackedRequest{First: offset, N: 0, Bytes: b.bytes + RequestEnvelopeSize(namespace)})
		offset += b.n
	}
	firstReq := len(reqs) - len(bins)
	place := binOf
	for i, b := range binOf {
		r := &reqs[firstReq+int(b)]
		place[i] = int32(r.First + r.N)
		r.N++
	}
	// Move each datum to its place: every swap settles one datum for good.
	for i := range datums {
		for p := int(place[i]); p != i; p = int(place[i]) {
			datums[i], datums[p] = datums[p], datums[i]
			place[i], place[p] = place[p], place[i]
		}
	}
	return reqs
}

// firstFit returns the first bin from `from` with room for n datums of size
// bytes, or -1.
func firstFit(bins []bin, from, n, size, budget int) int {
	for i := from; i < len(bins); i++ {
		if bins[i].n+n <= MaxDatumsPerRequest && bins[i].bytes+size <= budget {
			return i
		}
	}
	return -1
}

// Exact sizes of the CBOR the SDK writes (smithy RPC v2: indefinite-length
// maps and lists, member names as text keys, float64 for every double,
// timestamps as tag 1 + float64).
const (
	float64Size   = 9
	timestampSize = 1 + float64Size
	// minDatumSize is the smallest datum this exporter writes (a one-letter
	// name, no dimensions, Value, Timestamp, StorageResolution 1, Unit None).
	minDatumSize = 2 + (1 + 10 + 2) + (1 + 9 + timestampSize) + (1 + 5 + float64Size) + (1 + 17 + 1) + (1 + 4 + 1 + 4)
)

func textSize(s string) int { return argSize(len(s)) + len(s) }

func argSize(n int) int {
	switch {
	case n < 24:
		return 1
	case n < 1<<8:
		return 2
	case n < 1<<16:
		return 3
	case n < 1<<32:
		return 5
	}
	return 9
}

// RequestEnvelopeSize is the body of a request without its datums.
func RequestEnvelopeSize(namespace string) int {
	return 1 + // map start
		textSize("MetricData") + 1 + 1 + // list start and end
		textSize("Namespace") + textSize(namespace) +
		1 // map end
}

// DatumSize is the exact serialized size of one MetricDatum.
func DatumSize(d *Datum) int {
	n := 2 // map start and end
	n += textSize("MetricName") + textSize(d.Name)
	if len(d.Dims) > 0 {
		n += textSize("Dimensions") + 2
		for i := range d.Dims {
			n += 2 + textSize("Name") + textSize(d.Dims[i].Name) + textSize("Value") + textSize(d.Dims[i].Value)
		}
	}
	n += textSize("Timestamp") + timestampSize
	switch d.Kind {
	case KindValue:
		n += textSize("Value") + float64Size
	case KindStatistics:
		n += textSize("StatisticValues") + 2 +
			textSize("Maximum") + textSize("Minimum") + textSize("SampleCount") + textSize("Sum") + 4*float64Size
	case KindValues:
		n += textSize("Values") + 2 + len(d.Values())*float64Size
		n += textSize("Counts") + 2 + len(d.Counts())*float64Size
	}
	if d.Unit != 0 {
		n += textSize("Unit") + textSize(string(d.Unit.standard()))
	}
	n += textSize("StorageResolution") + argSize(int(d.Resolution))
	return n
}
