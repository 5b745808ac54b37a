// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package maprewrite turns a function that rewrites the configuration as a
// map, reading the environment, into the converter factory ocb wires in.
package maprewrite // import "github.com/gpubuild/otelcol-gpubuild/internal/confmap/maprewrite"

import (
	"context"
	"os"

	"go.opentelemetry.io/collector/confmap"
)

// Apply rewrites cfg, reading variables through lookupEnv.
type Apply func(cfg map[string]any, lookupEnv func(string) (string, bool)) (map[string]any, error)

// NewFactory returns a converter factory that runs apply on the process's
// environment.
func NewFactory(apply Apply) confmap.ConverterFactory {
	return confmap.NewConverterFactory(func(confmap.ConverterSettings) confmap.Converter {
		return converter{apply: apply, lookupEnv: os.LookupEnv}
	})
}

type converter struct {
	apply     Apply
	lookupEnv func(string) (string, bool)
}

func (c converter) Convert(_ context.Context, conf *confmap.Conf) error {
	out, err := c.apply(conf.ToStringMap(), c.lookupEnv)
	if err != nil {
		return err
	}
	*conf = *confmap.NewFromStringMap(out)
	return nil
}
