// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver // import "github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver"

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"
)

const (
	// xidWaitTimeout bounds how long shutdown waits for the event loop.
	xidWaitTimeout = 500 * time.Millisecond
	// xidErrorBackoff keeps a failing event set from spinning.
	xidErrorBackoff = 5 * time.Second
)

type xidCount struct {
	xid   uint64
	count int64
}

// xidWatcher counts XID errors from NVML events. One event set and one
// goroutine serve every GPU.
type xidWatcher struct {
	set    nvml.EventSet
	logger *zap.Logger

	mu     sync.Mutex
	uuids  map[device]string           // event handle -> GPU UUID
	counts map[string]map[uint64]int64 // GPU UUID -> XID -> count

	done chan struct{}
	wg   sync.WaitGroup
}

// startXIDWatcher registers the GPUs for XID events. It returns nil when no
// GPU can deliver them.
func startXIDWatcher(lib library, gpus []*gpuState, logger *zap.Logger) *xidWatcher {
	set, ret := lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		logger.Info("NVML event set unavailable; gpu.xid.errors will not be reported", zap.Error(ret))
		return nil
	}
	w := &xidWatcher{
		set:    set,
		uuids:  make(map[device]string, len(gpus)),
		logger: logger,
		counts: make(map[string]map[uint64]int64),
		done:   make(chan struct{}),
	}
	for _, g := range gpus {
		w.register(g)
	}
	if len(w.uuids) == 0 {
		_ = set.Free() // an empty set: nothing was registered on it
		return nil
	}
	w.wg.Add(1)
	go w.run()
	return w
}

// register adds a GPU's handle to the event set: at start, and again when
// a lost GPU comes back with a new handle.
func (w *xidWatcher) register(g *gpuState) {
	if ret := g.dev.RegisterEvents(nvml.EventTypeXidCriticalError, w.set); ret != nvml.SUCCESS {
		w.logger.Info("GPU cannot report XID events; gpu.xid.errors skipped for it",
			zap.Int("gpu.index", g.index), zap.String("gpu.uuid", g.uuid), zap.Error(ret))
		return
	}
	w.mu.Lock()
	w.uuids[g.dev] = g.uuid
	w.mu.Unlock()
}

func (w *xidWatcher) run() {
	defer w.wg.Done()
	timeout := uint32(xidWaitTimeout / time.Millisecond)
	for {
		select {
		case <-w.done:
			return
		default:
		}
		data, ret := w.set.Wait(timeout)
		switch ret {
		case nvml.SUCCESS:
			w.record(data)
		case nvml.ERROR_TIMEOUT:
		default:
			w.logger.Debug("waiting for NVML events failed", zap.Error(ret))
			select {
			case <-w.done:
				return
			case <-time.After(xidErrorBackoff):
			}
		}
	}
}

func (w *xidWatcher) record(data nvml.EventData) {
	if data.EventType&nvml.EventTypeXidCriticalError == 0 || data.Device == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	uuid, ok := w.uuids[data.Device]
	if !ok {
		return
	}
	w.logger.Warn("GPU reported an XID error", zap.String("gpu.uuid", uuid), zap.Uint64("gpu.xid", data.EventData))
	byXID := w.counts[uuid]
	if byXID == nil {
		byXID = make(map[uint64]int64)
		w.counts[uuid] = byXID
	}
	byXID[data.EventData]++
}

// appendCounts appends the counts of one GPU, ordered by XID.
func (w *xidWatcher) appendCounts(dst []xidCount, uuid string) []xidCount {
	w.mu.Lock()
	for xid, n := range w.counts[uuid] {
		dst = append(dst, xidCount{xid: xid, count: n})
	}
	w.mu.Unlock()
	slices.SortFunc(dst, func(a, b xidCount) int { return cmp.Compare(a.xid, b.xid) })
	return dst
}

func (w *xidWatcher) stop() {
	close(w.done)
	w.wg.Wait()
	_ = w.set.Free() // stopping: a failure leaks a driver handle, nothing to retry
}
