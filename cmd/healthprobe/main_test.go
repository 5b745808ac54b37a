// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestProbe(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) }))
	defer srv.Close()

	require.NoError(t, probe(srv.URL, time.Second))

	status = http.StatusServiceUnavailable
	require.ErrorContains(t, probe(srv.URL, time.Second), "503")

	srv.Close()
	require.Error(t, probe(srv.URL, time.Second), "nothing listening is unhealthy")
}
