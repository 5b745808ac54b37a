package main

import (
	"os"
	"runtime"
)

// A sidecar's load arrives a few requests at a time. With more than one P,
// the Go scheduler wakes an idle thread for each goroutine made ready, and
// on a GPU worker's shared cores those wake-ups cost more CPU than the work
// they hand over: on one P the sidecar used about a fifth less CPU at the
// base load. Its peak is measured on one core anyway. A GOMAXPROCS in the environment (a gateway on a large
// machine) is left to the runtime to apply.
//
// This file is not generated: ocb leaves files it does not write in place.
func init() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}
