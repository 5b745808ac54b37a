// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package send // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/send"

import (
	"bytes"
	"context"
	"fmt"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// What this package assumes of the AWS SDK beyond its documented API: that
// its client protocol can be wrapped to send a body written here. The
// guard tests are the exporter's (upstream_test.go at its root).

// minCompressBytes is the SDK's default threshold for gzip (request
// compression is modeled on PutMetricData; smaller bodies go as they are).
const minCompressBytes = 10240

// preparedBody is a request body the exporter wrote, handed to the protocol
// through the request's context.
type preparedBody struct {
	Bytes   []byte
	Gzipped bool
	// hash identifies the request in the record of answered requests
	// (answerRecorder); answered is nil without one.
	hash     uint64
	answered *AnsweredRequests
}

type preparedBodyKey struct{}

// presetBodyProtocol is the client protocol of the exporter's CloudWatch
// client: the SDK's own, except that a PutMetricData call carrying a
// prepared body in its context sends that body.
type presetBodyProtocol struct {
	smithyhttp.ClientProtocol
}

func (p presetBodyProtocol) SerializeRequest(ctx context.Context, schema *smithy.OperationSchema, in smithy.Serializable, req *smithyhttp.Request) error {
	// The SDK sets the method, path and headers (from an input holding
	// only the namespace, so its own body is tiny), then the body is ours.
	if err := p.ClientProtocol.SerializeRequest(ctx, schema, in, req); err != nil {
		return err
	}
	body, ok := ctx.Value(preparedBodyKey{}).(*preparedBody)
	if !ok {
		return nil
	}
	if body.Gzipped {
		req.Header.Set("Content-Encoding", "gzip")
	}
	sreq, err := req.SetStream(bytes.NewReader(body.Bytes))
	if err != nil {
		return fmt.Errorf("set stream: %w", err)
	}
	*req = *sreq
	return nil
}
