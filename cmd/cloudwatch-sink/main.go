// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Command cloudwatch-sink runs a local CloudWatch PutMetricData endpoint
// (internal/testing/cloudwatchtest: the SDK's protocol, CloudWatch's limits and
// errors) and prints every accepted datum as one line of JSON on stdout, so
// that a newcomer can watch metrics land without an AWS account.
//
// Point the cloudwatch exporter at it:
//
//	exporters:
//	  cloudwatch:
//	    namespace: GPUBuild/Demo
//	    region: us-east-1
//	    endpoint: http://127.0.0.1:4566
//	    output_destination: cloudwatch
//
// The SDK still signs requests, so give the collector any credentials,
// e.g. AWS_ACCESS_KEY_ID=demo AWS_SECRET_ACCESS_KEY=demo.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:4566", "address to serve PutMetricData on")
	quiet := flag.Bool("quiet", false, "do not print each datum; only the summary at exit")
	flag.Parse()
	out := io.Writer(os.Stdout)
	if *quiet {
		out = io.Discard
	}
	totals := newSummary()
	server, err := serve(*listen, out, os.Stderr, totals.add)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cloudwatch-sink:", err)
		os.Exit(1)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	<-stop
	_ = server.Close()
	totals.print(os.Stdout)
}

// serve starts the endpoint: accepted datums go to out as JSON lines,
// rejected requests to log.
func serve(listen string, out, log io.Writer, observe func(cloudwatchtest.Datum)) (*cloudwatchtest.Server, error) {
	server, err := cloudwatchtest.Start(listen)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	enc := json.NewEncoder(out)
	server.OnAccept(func(datums []cloudwatchtest.Datum) {
		mu.Lock()
		defer mu.Unlock()
		for _, d := range datums {
			_ = enc.Encode(d)
			if observe != nil {
				observe(d)
			}
		}
		server.Reset() // printed: no need to keep them
	})
	server.OnReject(func(r cloudwatchtest.Request) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(log, "cloudwatch-sink: rejected a request of %d bytes: %s: %s\n", r.BodyBytes, r.ErrorCode, r.Message)
	})
	fmt.Fprintf(log, "cloudwatch-sink: serving PutMetricData on %s; accepted datums are printed on stdout, one JSON line each\n", server.Endpoint())
	return server, nil
}
