// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package metricsswitch is a confmap converter for the build service's
// switch to disable metrics (the metrics RFC asks for one environment
// variable that a deployer flips in Docker or Kubernetes).
//
// With GPUBUILD_METRICS_ENABLED=false the collector still starts, stays
// healthy and keeps accepting OTLP, so the service is never refused and the
// sidecar never crash-loops; but nothing is collected, derived or exported:
// every pipeline keeps only its otlp receivers and ends in a nop exporter.
package metricsswitch

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"

	"go.opentelemetry.io/collector/confmap"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/internal/confmap/envflag"
)

// EnvVar is the environment variable that turns metric collection off.
const EnvVar = "GPUBUILD_METRICS_ENABLED"

// disabledExporter is the exporter every pipeline ends in when metrics are off.
const disabledExporter = "nop/metrics_disabled"

// NewFactory returns the converter factory that ocb wires into the distribution.
func NewFactory() confmap.ConverterFactory {
	return confmap.NewConverterFactory(func(set confmap.ConverterSettings) confmap.Converter {
		return &converter{logger: set.Logger, lookupEnv: os.LookupEnv}
	})
}

type converter struct {
	logger    *zap.Logger
	lookupEnv func(string) (string, bool)
}

func (c *converter) Convert(_ context.Context, conf *confmap.Conf) error {
	enabled, err := Enabled(c.lookupEnv)
	if err != nil || enabled {
		return err
	}
	disabled, err := Disable(conf.ToStringMap())
	if err != nil {
		return err
	}
	*conf = *confmap.NewFromStringMap(disabled)
	if c.logger != nil {
		c.logger.Warn("Metrics are disabled by " + EnvVar + "=false: OTLP is still accepted and discarded; nothing is scraped, derived or exported.")
	}
	return nil
}

// Enabled reads the switch. Unset or empty means enabled; anything that is
// not a boolean is a configuration error rather than a silent default.
func Enabled(lookupEnv func(string) (string, bool)) (bool, error) {
	return envflag.Bool(lookupEnv, EnvVar, true)
}

// Disable rewrites a collector configuration so that every pipeline keeps
// only its otlp receivers and exports to a nop exporter. Pipelines without an
// otlp receiver are removed. Components that are no longer referenced stay
// defined: the collector ignores them.
func Disable(cfg map[string]any) (map[string]any, error) {
	service, _ := cfg["service"].(map[string]any)
	pipelines, _ := service["pipelines"].(map[string]any)
	if len(pipelines) == 0 {
		return nil, fmt.Errorf("%s=false: service::pipelines is empty", EnvVar)
	}

	kept := make(map[string]any, len(pipelines))
	for _, id := range sortedKeys(pipelines) {
		pipeline, _ := pipelines[id].(map[string]any)
		receivers := otlpReceivers(pipeline["receivers"])
		if len(receivers) == 0 {
			continue
		}
		kept[id] = map[string]any{
			"receivers": receivers,
			"exporters": []any{disabledExporter},
		}
	}
	if len(kept) == 0 {
		return nil, fmt.Errorf("%s=false: no pipeline has an otlp receiver to keep the service's exports accepted", EnvVar)
	}

	out := make(map[string]any, len(cfg))
	for k, v := range cfg {
		out[k] = v
	}
	exporters := map[string]any{}
	if existing, ok := cfg["exporters"].(map[string]any); ok {
		for k, v := range existing {
			exporters[k] = v
		}
	}
	exporters[disabledExporter] = nil
	out["exporters"] = exporters

	newService := make(map[string]any, len(service))
	for k, v := range service {
		newService[k] = v
	}
	newService["pipelines"] = kept
	out["service"] = newService
	return out, nil
}

func otlpReceivers(v any) []any {
	list, _ := v.([]any)
	var out []any
	for _, r := range list {
		id, ok := r.(string)
		if !ok {
			continue
		}
		if typ, _, _ := strings.Cut(id, "/"); typ == "otlp" {
			out = append(out, id)
		}
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
