// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package send // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/send"

import (
	"context"
	"net/http"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/answered"
)

// AnsweredRequests is the record of answered requests of a persistent
// queue (internal/answered); a nil *answeredRequests records nothing.
type AnsweredRequests struct {
	record  *answered.Record
	logger  *zap.Logger
	failing atomic.Bool // the last write failed (logged once per episode)
}

// seen reports whether a request was answered by a previous process
// (killed before its queue recorded the item as sent): it is then not sent
// again.
func (a *AnsweredRequests) seen(hash uint64, datums int) bool {
	if a == nil || !a.record.Answered(hash) {
		return false
	}
	a.logger.Info("A PutMetricData request answered before the restart is not sent again", zap.Int("datums", datums))
	return true
}

// add records an answered request. A failed write only leaves the window
// open for this request; it is logged once until a write succeeds.
func (a *AnsweredRequests) add(ctx context.Context, hash uint64) {
	if a == nil {
		return
	}
	if err := a.record.Add(ctx, hash); err != nil {
		if !a.failing.Swap(true) {
			a.logger.Warn("Could not record an answered PutMetricData request: a kill -9 before its queue records it sends it again", zap.Error(err))
		}
		return
	}
	a.failing.Store(false)
}

// answerRecorder is the CloudWatch client's HTTP client: it records a
// request carrying a prepared body as answered as soon as CloudWatch's 2xx
// status arrives, before the SDK reads and decodes the answer (measured:
// most of the time from the answer to PutMetricData's return).
type answerRecorder struct{ next cloudwatch.HTTPClient }

func (r answerRecorder) Do(req *http.Request) (*http.Response, error) {
	resp, err := r.next.Do(req)
	if err == nil && resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if b, ok := req.Context().Value(preparedBodyKey{}).(*preparedBody); ok {
			b.answered.add(req.Context(), b.hash)
		}
	}
	return resp, err
}

// Close closes the record.
func (a *AnsweredRequests) Close(ctx context.Context) error {
	if a == nil {
		return nil
	}
	return a.record.Close(ctx)
}

// NewAnsweredRequests wraps an opened record.
func NewAnsweredRequests(rec *answered.Record, logger *zap.Logger) *AnsweredRequests {
	return &AnsweredRequests{record: rec, logger: logger}
}

// Forget ends the look-ups of the previous process's answers.
func (a *AnsweredRequests) Forget() { a.record.Forget() }
