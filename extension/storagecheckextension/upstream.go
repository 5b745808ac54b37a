// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package storagecheckextension // import "github.com/gpubuild/otelcol-gpubuild/extension/storagecheckextension"

import "strings"

// What this extension assumes of contrib's file_storage, beyond its
// documented configuration, is in this file; TestFileStorageFilesAreChecked
// (upstream_test.go) fails when file_storage names or writes its files
// otherwise: a bbolt file per client, named <kind>_<type>_<name>..., opened
// only when a component asks for its client (after every extension has
// started). checkFile reads the files with bbolt.

// storageFilePrefixes are the names file_storage gives its files
// (<kind>_<type>_<name>...); anything else in the directory is not ours to move.
var storageFilePrefixes = []string{"receiver_", "processor_", "exporter_", "extension_", "connector_", "other_"}

// isStorageFile tells a file_storage file from anything else in the
// directory (what the check moved aside, file_storage's compaction backup).
func isStorageFile(name string) bool {
	if strings.HasSuffix(name, damagedSuffix) || strings.HasSuffix(name, ".backup") {
		return false
	}
	for _, p := range storageFilePrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
