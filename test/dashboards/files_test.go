// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package dashboards

import "testing"

// The shipped files parse, without a run: what TestDashboardsAgainstRealOutput
// reads from them.
func TestShippedFilesParse(t *testing.T) {
	loadRules(t)
	loadGrafana(t)
	loadPromQLAlarms(t)
	loadTemplate(t, map[string]any{"ServiceName": serviceName})
}
