// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package gpujoin // import "github.com/gpubuild/otelcol-gpubuild/internal/buildjob/gpujoin"

import "github.com/gpubuild/otelcol-gpubuild/internal/gpucost"

// Figure is one of the per-run GPU figures.
type Figure uint8

// The figures of a run, then of a stage (StageFigures further on).
const (
	FigureEnergy Figure = iota
	FigureBusy
	FigureMemory
	FigureSMActivity
	FigureTensorActivity
	FigureStageEnergy
	FigureStageBusy
	FigureStageMemory
	FigureStageSMActivity
	FigureStageTensorActivity
	NumAllFigures
)

// NumFigures is how many figures a run (or a stage run) has.
const NumFigures = int(FigureStageEnergy)

// StageFigures is the offset from a run's figure to the stage's.
const StageFigures = FigureStageEnergy - FigureEnergy

func (f Figure) String() string {
	return [...]string{"energy", "busy_time", "memory_peak", "sm_activity", "tensor_activity",
		"stage_energy", "stage_busy_time", "stage_memory_peak", "stage_sm_activity", "stage_tensor_activity"}[f]
}

// SkipReason says why a run has no GPU figure: gpucost's reasons, then
// the join's own.
type SkipReason uint8

// The join's own reasons.
const (
	SkipNoWindow        = SkipReason(gpucost.NumReasons) + iota // the run has no start or end (timed out, end only)
	SkipGPUNotFound                                             // the run names a GPU the sampler does not see
	SkipNoPID                                                   // the service has no process.pid resource attribute
	SkipProcessNotOnGPU                                         // the service's process held no memory on the run's GPUs
	SkipNoGPM                                                   // a GPU of the run has no GPM (before Hopper): no SM or tensor activity
	NumSkipReasons
)

// Covered is no reason: the figure has a value.
const Covered = SkipReason(gpucost.Covered)

func (r SkipReason) String() string {
	switch r {
	case SkipNoWindow:
		return "no_window"
	case SkipGPUNotFound:
		return "gpu_not_found"
	case SkipNoPID:
		return "no_process_pid"
	case SkipProcessNotOnGPU:
		return "process_not_on_gpu"
	case SkipNoGPM:
		return "no_gpm"
	}
	return gpucost.Reason(r).String()
}
