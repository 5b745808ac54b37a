// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package runtimetuning holds the settings the binary applies to its own
// Go runtime and process at start, before the collector runs: every one
// of them is here, entered from one hand-written file in distro/ beside
// ocb's output, and each is named in the README's table of variables.
//
//   - One P unless GOMAXPROCS is set. A sidecar's load arrives a few
//     requests at a time; with more than one P the scheduler wakes an idle
//     thread for each goroutine made ready, and on a GPU worker's shared
//     cores those wake-ups cost more CPU than the work they hand over (on
//     one P the sidecar used about a fifth less CPU at the base load). Its
//     peak is measured on one core anyway. A GOMAXPROCS in the environment
//     (a gateway on a large machine) is left to the runtime to apply.
//   - The heap given back between bursts (idlememory): a sidecar works in
//     bursts and is quiet in between, when the Go runtime would keep the
//     last burst's garbage resident until the next one.
//   - The start's code given back (exepages): starting reads most of the
//     binary into memory, of which running uses a fraction; once the start
//     is over the executable's pages, and those of the libraries it was
//     linked with, are given back and read again one at a time as they run.
//
// GPUBUILD_RELEASE_IDLE_MEMORY=false turns both releases off, keeping the
// runtime's and the kernel's own behaviour.
package runtimetuning // import "github.com/gpubuild/otelcol-gpubuild/internal/runtimetuning"

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/gpubuild/otelcol-gpubuild/internal/runtimetuning/exepages"
	"github.com/gpubuild/otelcol-gpubuild/internal/runtimetuning/idlememory"
)

// MaxProcsEnvVar is the runtime's own variable: set, it decides the number
// of Ps; unset, the binary runs on one.
const MaxProcsEnvVar = "GOMAXPROCS"

// StartOver is when the start's code is given back: the collector starts
// in about a second, and the code it runs once (configuration, factories,
// credential resolution) is not run again.
const StartOver = 10 * time.Second

// Settings are what Apply does, read from the environment by FromEnv.
type Settings struct {
	// OneP sets GOMAXPROCS to 1 (the environment does not set it).
	OneP bool
	// ReleaseIdleMemory gives the heap back between bursts and the start's
	// code back once the start is over.
	ReleaseIdleMemory bool
}

// FromEnv reads the settings; a value that is not valid is an error naming
// its variable.
func FromEnv(lookupEnv func(string) (string, bool)) (Settings, error) {
	release, err := idlememory.Enabled(lookupEnv)
	if err != nil {
		return Settings{}, err
	}
	v, _ := lookupEnv(MaxProcsEnvVar)
	return Settings{OneP: v == "", ReleaseIdleMemory: release}, nil
}

// Apply applies s to this process: GOMAXPROCS at once; the releases run in
// the background for the life of the process.
func (s Settings) Apply() {
	if s.OneP {
		runtime.GOMAXPROCS(1)
	}
	if s.ReleaseIdleMemory {
		go idlememory.Run(context.Background(), idlememory.DefaultConfig())
		// Best effort: where the kernel refuses the advice, nothing is
		// given back and nothing else changes. The libraries are named
		// now, before the collector can open one of its own.
		libraries, _ := exepages.Libraries()
		time.AfterFunc(StartOver, func() { _ = exepages.Release(libraries) })
	}
}

// Start reads the settings from the process's environment and applies
// them. A value that is not valid stops the process, whatever the command
// (validate included), with an error naming the variable, as the
// collector's own configuration errors do.
func Start() {
	s, err := FromEnv(os.LookupEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
	s.Apply()
}
