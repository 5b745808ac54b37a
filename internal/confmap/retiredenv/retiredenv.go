// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package retiredenv is a confmap converter that tells a deployer about
// environment variables an upgrade stopped reading: the collector starts
// as before, with one warning line naming what to set instead, at start
// and in `validate`.
//
// GPUBUILD_QUEUE_SIZE capped the sidecar's persistent queue in requests;
// the sidecar's queue is now capped in bytes by GPUBUILD_QUEUE_BYTES. The
// gateway configuration still reads GPUBUILD_QUEUE_SIZE, so the warning is
// given only when a cloudwatch exporter's sending_queue counts bytes.
package retiredenv // import "github.com/gpubuild/otelcol-gpubuild/internal/confmap/retiredenv"

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"go.opentelemetry.io/collector/confmap"
	"go.uber.org/zap"
)

const (
	// EnvQueueSize is the retired variable.
	EnvQueueSize = "GPUBUILD_QUEUE_SIZE"
	// EnvQueueBytes replaces it.
	EnvQueueBytes = "GPUBUILD_QUEUE_BYTES"
)

// NewFactory returns the converter factory that ocb wires into the distribution.
func NewFactory() confmap.ConverterFactory {
	return confmap.NewConverterFactory(func(set confmap.ConverterSettings) confmap.Converter {
		c := &converter{logger: set.Logger, lookupEnv: os.LookupEnv}
		if len(os.Args) > 1 && os.Args[1] == "validate" {
			// validate never writes what was logged while the config was
			// resolved (the collector buffers it for the service's logger).
			c.validate = os.Stderr
		}
		return c
	})
}

type converter struct {
	logger    *zap.Logger
	lookupEnv func(string) (string, bool)
	// validate, when set, receives the lines instead of the logger.
	validate io.Writer
}

// Convert changes nothing; it only warns.
func (c *converter) Convert(_ context.Context, conf *confmap.Conf) error {
	for _, line := range Warnings(conf.ToStringMap(), c.lookupEnv) {
		switch {
		case c.validate != nil:
			_, _ = fmt.Fprintln(c.validate, "warn: "+line)
		case c.logger != nil:
			c.logger.Warn(line)
		}
	}
	return nil
}

// Warnings are the lines to log for the retired variables set in the
// environment that cfg no longer reads.
func Warnings(cfg map[string]any, lookupEnv func(string) (string, bool)) []string {
	v, ok := lookupEnv(EnvQueueSize)
	if !ok {
		return nil
	}
	exporters, _ := cfg["exporters"].(map[string]any)
	ids := make([]string, 0, len(exporters))
	for id := range exporters {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var lines []string
	for _, id := range ids {
		if typ, _, _ := strings.Cut(id, "/"); typ != "cloudwatch" {
			continue
		}
		exp, _ := exporters[id].(map[string]any)
		queue, _ := exp["sending_queue"].(map[string]any)
		if sizer, _ := queue["sizer"].(string); sizer != "bytes" {
			continue
		}
		lines = append(lines, fmt.Sprintf(
			"%s is no longer read (set to %q): the sending queue of exporter %s is capped in bytes; set %s (bytes, default 268435456 = 256 MiB; now %v)",
			EnvQueueSize, v, id, EnvQueueBytes, queue["queue_size"]))
	}
	return lines
}
