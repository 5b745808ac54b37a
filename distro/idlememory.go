package main

import (
	"context"
	"fmt"
	"os"

	"github.com/gpubuild/otelcol-gpubuild/internal/idlememory"
)

// A sidecar works in bursts (the service's metric exports, the derived
// metrics' flushes) and is quiet in between, when the Go runtime would
// keep the last burst's garbage resident until the next one. Once
// allocation has been quiet for two seconds, the heap is collected and
// given back (internal/idlememory); GPUBUILD_RELEASE_IDLE_MEMORY=false
// keeps the runtime's own behaviour. A value that is not a boolean stops
// every command, validate included, naming the variable.
//
// This file is not generated: ocb leaves files it does not write in place.
func init() {
	on, err := idlememory.Enabled(os.LookupEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
	if on {
		go idlememory.Run(context.Background(), idlememory.DefaultConfig())
	}
}
