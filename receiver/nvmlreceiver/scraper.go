// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver // import "github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver"

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/scraper/scrapererror"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/internal/nvmlapi"
	"github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver/internal/metadata"
)

// gpuScraper owns the NVML session. scraperhelper never runs start, scrape
// and shutdown concurrently, so only the XID watcher needs a lock.
type gpuScraper struct {
	cfg      *Config
	settings receiver.Settings
	logger   *zap.Logger
	load     loadFunc

	gpmLock    *nvmlapi.GPMLock // the session's: the sampler's when borrowed
	ownGPMLock nvmlapi.GPMLock
	now        func() time.Time
	hostname   string

	mb    *metadata.MetricsBuilder
	procs *processResolver

	lib               library // nil until nvmlInit returned SUCCESS
	sym               symbols
	driver            string
	gpus              []*gpuState
	xid               *xidWatcher
	xidBuf            []xidCount
	nextInit          time.Time // next attempt to load NVML or to find GPUs
	initBackoff       nvmlapi.InitBackoff
	pace              *pacer // nil when no controller drives the scraper
	loadWarned        bool
	noGPUWarn         bool
	procMissingLogged bool
}

func newGPUScraper(cfg *Config, set receiver.Settings) *gpuScraper {
	return newGPUScraperWith(cfg, set, newSystemLoader(), os.DirFS("/proc"), time.Now)
}

// newGPUScraperWith takes the NVML loader, the /proc file system and the
// clock so tests can run on mocks and a temporary directory.
func newGPUScraperWith(cfg *Config, set receiver.Settings, load loadFunc, procFS fs.FS, now func() time.Time) *gpuScraper {
	return &gpuScraper{
		cfg:         cfg,
		settings:    set,
		logger:      set.Logger,
		load:        load,
		now:         now,
		procs:       newProcessResolver(procFS),
		initBackoff: nvmlapi.InitBackoff{Initial: cfg.InitRetryInterval, Max: cfg.InitRetryMaxInterval},
	}
}

func (s *gpuScraper) start(_ context.Context, host component.Host) error {
	if s.cfg.NVMLSession != nil {
		load, err := sharedLoader(host, *s.cfg.NVMLSession)
		if err != nil {
			return err
		}
		s.load = load
	}
	s.mb = metadata.NewMetricsBuilder(s.cfg.MetricsBuilderConfig, s.settings,
		metadata.WithStartTime(pcommon.NewTimestampFromTime(s.now())))
	if s.cfg.ResourceAttributes.HostName.Enabled {
		if h, err := os.Hostname(); err == nil {
			s.hostname = h
		}
	}
	// A missing library or GPU is not a start error: the collector must come
	// up on machines without NVIDIA hardware.
	s.initNVML()
	return nil
}

func (s *gpuScraper) shutdown(context.Context) error {
	if s.pace != nil {
		s.pace.shutdown()
	}
	if s.xid != nil {
		s.xid.stop()
		s.xid = nil
	}
	if s.lib != nil {
		for _, g := range s.gpus {
			s.freeGPM(g)
		}
		if ret := s.lib.Shutdown(); ret != nvml.SUCCESS {
			s.logger.Debug("NVML shutdown failed", zap.Error(ret))
		}
		s.lib = nil
	}
	s.gpus = nil
	return nil
}

// initNVML loads NVML if it is not loaded yet and then enumerates the GPUs.
// On failure it schedules the next attempt init_retry_interval later,
// doubling after each further failure up to init_retry_max_interval. On a
// borrowed session the extension's attempts follow the same rule, so the
// receiver wakes no more often than the extension tries.
func (s *gpuScraper) initNVML() {
	s.nextInit = s.now().Add(s.initBackoff.Failed()) // unless GPUs are found below
	if s.lib == nil {
		lib, err := s.load()
		if err != nil {
			if !s.loadWarned {
				s.logger.Warn("NVML is not available: no GPU metrics until it loads; retrying with back-off",
					zap.Error(err), zap.Duration("init_retry_interval", s.cfg.InitRetryInterval),
					zap.Duration("init_retry_max_interval", s.cfg.InitRetryMaxInterval))
				s.loadWarned = true
			} else {
				s.logger.Debug("NVML still not available", zap.Error(err))
			}
			return
		}
		sym := lookupSymbols(lib)
		if !sym.Core {
			// Not an NVML this receiver can use; calling the missing
			// entry points would kill the process.
			s.logger.Error("the NVML library lacks entry points every scrape needs; no GPU metrics (retrying periodically)",
				zap.Strings("missing", sym.Missing))
			if lib.Extensions().LookupSymbol("nvmlShutdown") == nil {
				_ = lib.Shutdown() // nothing to do when it fails: the library is left unused
			}
			return
		}
		s.lib = lib
		s.gpmLock = gpmLockOf(lib, &s.ownGPMLock)
		s.sym = sym
		if sym.DriverVersion {
			if v, ret := lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
				s.driver = v
			}
		}
		s.logger.Info("NVML loaded", zap.String("driver_version", s.driver))
		if len(sym.Missing) > 0 {
			s.logger.Warn("the NVML library lacks some entry points (an older driver?); only the metrics that need them are not reported",
				zap.Strings("missing", sym.Missing))
		}
	}
	s.enumerate()
}

// enumerate builds the list of GPUs to scrape, applying the devices filter.
func (s *gpuScraper) enumerate() {
	count, ret := s.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		s.logger.Warn("NVML cannot count GPUs", zap.Error(ret))
		return
	}
	wantIndex, wantUUID := deviceFilter(s.cfg.Devices)
	gpus := make([]*gpuState, 0, count)
	for i := range count {
		h, ret := s.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			s.logger.Warn("NVML cannot open GPU", zap.Int("gpu.index", i), zap.Error(ret))
			continue
		}
		uuid, ret := h.GetUUID()
		if ret != nvml.SUCCESS {
			s.logger.Warn("NVML cannot read GPU UUID", zap.Int("gpu.index", i), zap.Error(ret))
			continue
		}
		if len(s.cfg.Devices) > 0 {
			_, byIndex := wantIndex[i]
			_, byUUID := wantUUID[uuid]
			if !byIndex && !byUUID {
				continue
			}
			delete(wantIndex, i)
			delete(wantUUID, uuid)
		}
		gpus = append(gpus, s.newGPUState(h, i, uuid))
	}
	for idx := range wantIndex {
		s.logger.Warn("devices: no GPU with this index", zap.Int("gpu.index", idx), zap.Int("gpu_count", count))
	}
	for uuid := range wantUUID {
		s.logger.Warn("devices: no GPU with this UUID", zap.String("gpu.uuid", uuid))
	}
	if len(gpus) == 0 {
		if !s.noGPUWarn {
			s.logger.Warn("NVML loaded but found no GPU to scrape; looking again periodically",
				zap.Int("gpu_count", count), zap.Strings("devices", s.cfg.Devices))
			s.noGPUWarn = true
		}
		return
	}
	s.gpus = gpus
	s.initBackoff.Reset()
	s.logger.Info("scraping GPUs", zap.Int("count", len(gpus)))
	if s.cfg.Metrics.GpuXidErrors.Enabled && s.sym.Events && s.xid == nil {
		s.xid = startXIDWatcher(s.lib, gpus, s.logger)
	}
}

// deviceFilter splits the devices setting into indices and UUIDs. Config
// validation has already rejected anything else.
func deviceFilter(devices []string) (map[int]struct{}, map[string]struct{}) {
	indices := make(map[int]struct{})
	uuids := make(map[string]struct{})
	for _, d := range devices {
		if i, err := strconv.Atoi(d); err == nil {
			indices[i] = struct{}{}
		} else {
			uuids[d] = struct{}{}
		}
	}
	return indices, uuids
}

func (s *gpuScraper) newGPUState(h device, index int, uuid string) *gpuState {
	g := &gpuState{dev: h, index: index, uuid: uuid}
	if s.sym.Name {
		if name, ret := h.GetName(); ret == nvml.SUCCESS {
			g.model = name
		}
	}
	if s.sym.PciInfo {
		if pci, ret := h.GetPciInfo(); ret == nvml.SUCCESS {
			g.busID = cString(pci.BusId[:])
		}
	}
	g.resource = s.gpuResource(g).Emit()
	return g
}

func (s *gpuScraper) gpuResource(g *gpuState) *metadata.ResourceBuilder {
	rb := s.mb.NewResourceBuilder()
	rb.SetHwID(g.uuid)
	rb.SetHwType("gpu")
	rb.SetHwVendor("NVIDIA")
	rb.SetHwModel(g.model)
	rb.SetHwDriverVersion(s.driver)
	rb.SetGpuIndex(int64(g.index))
	rb.SetGpuPciBusID(g.busID)
	if s.hostname != "" {
		rb.SetHostName(s.hostname)
	}
	return rb
}

func (s *gpuScraper) scrape(context.Context) (pmetric.Metrics, error) {
	defer s.scheduleNext()
	if len(s.gpus) == 0 {
		if s.now().Before(s.nextInit) {
			return pmetric.NewMetrics(), nil
		}
		s.initNVML()
		if len(s.gpus) == 0 {
			return pmetric.NewMetrics(), nil
		}
	}
	ts := pcommon.NewTimestampFromTime(s.now())
	var errs scrapererror.ScrapeErrors
	s.procs.beginScrape()
	for _, g := range s.gpus {
		if g.gone && !s.reacquire(g) {
			continue
		}
		s.scrapeGPU(g, ts, &errs)
	}
	s.procs.endScrape()
	return s.mb.Emit(), errs.Combine()
}

// scheduleNext arms the next scrape: at the collection interval while there
// are GPUs, otherwise only at the next NVML attempt, as before that a scrape
// has nothing to do.
func (s *gpuScraper) scheduleNext() {
	switch {
	case s.pace == nil:
	case len(s.gpus) > 0:
		s.pace.atRate()
	default:
		s.pace.after(s.nextInit.Sub(s.now()))
	}
}

// check sorts an NVML answer for one feature of one GPU: true means use the
// value. Unsupported features are logged once per GPU and skipped; a lost
// GPU is reported once per scrape; anything else is a partial scrape error.
func (s *gpuScraper) check(g *gpuState, f feature, ret nvml.Return, errs *scrapererror.ScrapeErrors) bool {
	switch {
	case ret == nvml.SUCCESS:
		return true
	case isUnsupported(ret):
		s.reportUnsupported(g, f, ret)
	case ret == nvml.ERROR_GPU_IS_LOST:
		if !g.lost {
			g.lost = true
			g.gone = true
			g.retryAt = s.now().Add(s.cfg.InitRetryInterval)
			errs.AddPartial(1, fmt.Errorf("gpu %d (%s): %w", g.index, g.uuid, errGPULost))
			s.logger.Warn("GPU is lost (fallen off the bus or otherwise inaccessible); no metrics for it until NVML finds it again, retrying periodically",
				zap.Int("gpu.index", g.index), zap.String("gpu.uuid", g.uuid), zap.Duration("init_retry_interval", s.cfg.InitRetryInterval))
		}
	default:
		errs.AddPartial(1, fmt.Errorf("gpu %d (%s): %s: %w", g.index, g.uuid, f, ret))
	}
	return false
}

func (s *gpuScraper) reportUnsupported(g *gpuState, f feature, ret nvml.Return) {
	if g.reported&(1<<f) != 0 {
		return
	}
	g.reported |= 1 << f
	msg := "GPU does not support a metric; skipping it for this GPU"
	if ret == nvml.ERROR_FUNCTION_NOT_FOUND {
		msg = "the NVML library lacks the entry point of a metric; skipping it"
	}
	s.logger.Info(msg, zap.String("what", f.String()), zap.Int("gpu.index", g.index), zap.String("gpu.uuid", g.uuid), zap.Error(ret))
}

// reacquire asks NVML again for a GPU that was lost, once per
// init_retry_interval. A GPU that comes back (after a reset or a driver
// reload) may have a new handle, so the handle is looked up by index and
// accepted only with the same UUID.
func (s *gpuScraper) reacquire(g *gpuState) bool {
	if s.now().Before(g.retryAt) {
		return false
	}
	g.retryAt = s.now().Add(s.cfg.InitRetryInterval)
	h, ret := s.lib.DeviceGetHandleByIndex(g.index)
	if ret != nvml.SUCCESS {
		s.logger.Debug("lost GPU still not available", zap.Int("gpu.index", g.index), zap.Error(ret))
		return false
	}
	uuid, ret := h.GetUUID()
	if ret != nvml.SUCCESS || uuid != g.uuid {
		s.logger.Debug("lost GPU still not available", zap.Int("gpu.index", g.index), zap.String("found_uuid", uuid), zap.Error(ret))
		return false
	}
	g.dev = h
	g.gone = false
	g.throttleKnown = false
	g.resetGPM()
	if s.xid != nil {
		s.xid.register(g)
	}
	s.logger.Info("lost GPU is back", zap.Int("gpu.index", g.index), zap.String("gpu.uuid", g.uuid))
	return true
}
