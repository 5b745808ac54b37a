// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver/fakenvml"
	"github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver/internal/metadata"
)

// A test that loads the fake NVML runs the receiver in a child process (this
// test binary re-executed), because a process can load only one NVML:
// go-nvml binds the C symbols once, and a wrong symbol kills the process.
// The child follows a script, writes every scrape and its log to files and
// exits; the parent test judges them.
const childScriptEnv = "NVMLRECEIVER_FAKE_CHILD_SCRIPT"

func init() {
	if path := os.Getenv(childScriptEnv); path != "" {
		if err := runChild(path); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
}

// childScript is what the child does.
type childScript struct {
	OutDir       string
	ProcDir      string
	StateFile    string
	InitialState fakenvml.State
	XIDEnabled   bool
	// Unguarded calls GetTemperature on GPU 0 straight after Init, without
	// the receiver's symbol check: what the receiver must never do.
	Unguarded bool
	Steps     []childStep
}

type childStep struct {
	State fakenvml.State
	// Advance moves the receiver's clock before the scrape.
	Advance time.Duration
	// AwaitXIDs waits until the XID watcher has counted this many events.
	AwaitXIDs int64
}

type childScrape struct {
	Metrics json.RawMessage
	Err     string
}

func runChild(scriptPath string) error {
	raw, err := os.ReadFile(scriptPath)
	if err != nil {
		return err
	}
	var sc childScript
	if err := json.Unmarshal(raw, &sc); err != nil {
		return err
	}
	if err := sc.InitialState.WriteFile(sc.StateFile); err != nil {
		return err
	}
	if sc.Unguarded {
		lib := nvml.New() // the default name, found through the search path
		if ret := lib.Init(); ret != nvml.SUCCESS {
			return fmt.Errorf("init: %v", ret)
		}
		d, _ := lib.DeviceGetHandleByIndex(0)
		t, ret := d.GetTemperature(nvml.TEMPERATURE_GPU)
		return fmt.Errorf("GetTemperature returned %d, %v: the process should have died", t, ret)
	}

	logFile, err := os.Create(filepath.Join(sc.OutDir, "log.json"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	set := receivertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(logFile), zapcore.DebugLevel))

	cfg := createDefaultConfig()
	cfg.Metrics.GpuXidErrors.Enabled = sc.XIDEnabled
	clock := &testClock{t: time.Unix(1_700_000_000, 0)}
	// The production loader: libnvidia-ml.so.1 through the library search
	// path (LD_LIBRARY_PATH set by the parent).
	s := newGPUScraperWith(cfg, set, newSystemLoader(), os.DirFS(sc.ProcDir), clock.now)
	ctx := context.Background()
	if err := s.start(ctx, componenttest.NewNopHost()); err != nil {
		return err
	}
	var marshaler pmetric.JSONMarshaler
	for i, step := range sc.Steps {
		if err := step.State.WriteFile(sc.StateFile); err != nil {
			return err
		}
		clock.advance(step.Advance)
		if step.AwaitXIDs > 0 {
			if err := awaitXIDs(s, step.AwaitXIDs); err != nil {
				return err
			}
		}
		md, scrapeErr := s.scrape(ctx)
		out := childScrape{}
		if scrapeErr != nil {
			out.Err = scrapeErr.Error()
		}
		if out.Metrics, err = marshaler.MarshalMetrics(md); err != nil {
			return err
		}
		b, err := json.Marshal(out)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(sc.OutDir, fmt.Sprintf("scrape-%d.json", i)), b, 0o600); err != nil {
			return err
		}
	}
	return s.shutdown(ctx)
}

// awaitXIDs waits for the watcher goroutine, which receives events from the
// fake's event set on its own schedule.
func awaitXIDs(s *gpuScraper, want int64) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got int64
		if s.xid != nil {
			s.xid.mu.Lock()
			for _, byXID := range s.xid.counts {
				for _, n := range byXID {
					got += n
				}
			}
			s.xid.mu.Unlock()
		}
		if got >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("XID watcher counted %d events, want %d", got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
