// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package gpucost

import "time"

// Sampler is what a GPU sampler (the nvml_sampler extension) offers other
// components: look the extension up in component.Host.GetExtensions and
// assert this interface. It lives here, not in the extension, so that the
// components that read samples link no NVML.
type Sampler interface {
	// Samples returns a copy of each GPU's samples that bear on the window
	// [from, to]: from the last sample at or before from to the first at or
	// after to. When to has passed but no sample is as new, it samples
	// first, so a window that has just ended is covered. Samples in time
	// order. No GPU (NVML absent, not loaded yet): nil.
	Samples(from, to time.Time) []Series
	// MaxGap is the longest time between two consecutive samples that is
	// still continuous sampling; a longer one means the sampler (or the
	// GPU) was away, and a window across it has no figure.
	MaxGap() time.Duration
}

// Series is one GPU's samples.
type Series struct {
	// Index is NVML's index of the GPU; UUID its GPU-... identifier.
	Index int
	UUID  string
	// Energy: the energy counter (mJ). Empty on GPUs without one.
	Energy []EnergySample
	// Util: utilization periods, the driver's own samples where it keeps
	// them, else the instantaneous reading at each sampling.
	Util []UtilSample
	// Memory: the compute processes and their memory at each sampling.
	Memory []MemSample
	// Power: the driver's power readings integrated, about every 100 ms,
	// which place the counter's energy inside a sampling gap. Empty where
	// the driver keeps no power readings.
	Power []PowerSample
	// GPM tells whether the GPU gives GPM profiling metrics (Hopper and
	// later, with a driver that has them). SMActivity and TensorActivity
	// are then its GPM SM activity and any-tensor activity (percent) over
	// the period since the previous sampling, as Util; a NaN percent opens
	// a period after a break (MeanActivity). Physical GPUs only:
	// the sampler does not sample MIG instances.
	GPM                        bool
	SMActivity, TensorActivity []UtilSample
}
