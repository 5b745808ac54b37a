package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/gpubuild/otelcol-gpubuild/internal/exepages"
	"github.com/gpubuild/otelcol-gpubuild/internal/idlememory"
)

// startOver is when the start's code is given back: the collector starts
// in about a second, and the code it runs once (configuration, factories,
// credential resolution) is not run again.
const startOver = 10 * time.Second

// A sidecar works in bursts (the service's metric exports, the derived
// metrics' flushes) and is quiet in between, when the Go runtime would
// keep the last burst's garbage resident until the next one. Once
// allocation has been quiet for two seconds, the heap is collected and
// given back (internal/idlememory). Starting reads most of the binary
// into memory, of which running uses a fraction: once the start is over,
// the executable's pages are given back and read again one at a time as
// they run (internal/exepages). GPUBUILD_RELEASE_IDLE_MEMORY=false keeps
// the runtime's and the kernel's own behaviour. A value that is not a
// boolean stops every command, validate included, naming the variable.
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
		// Best effort: where the kernel refuses the advice, nothing is
		// given back and nothing else changes.
		time.AfterFunc(startOver, func() { _ = exepages.Release() })
	}
}
