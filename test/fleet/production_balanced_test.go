// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build production

package fleet

import (
	"testing"
	"time"
)

// TestFleetBehindLoadBalancerAtProductionTiming (make fleet-production):
// TestFleetBehindLoadBalancer at the shipped timings: the 60 s interval,
// connections closed after the shipped 2 minutes, the shipped drain, the
// sidecars' shipped 10 s flushes, 4 minutes of builds.
func TestFleetBehindLoadBalancerAtProductionTiming(t *testing.T) {
	balancedFleet(t, balancedTimings{interval: time.Minute, jobs: 240, sideEnv: []string{"GPUBUILD_FLUSH_INTERVAL=10s"}})
}
