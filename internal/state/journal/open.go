// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package journal // import "github.com/gpubuild/otelcol-gpubuild/internal/state/journal"

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.uber.org/zap"
)

// StorageClientName is the name file_storage gives a component's client
// named name (and its file, less file_storage's escaping).
func StorageClientName(kind component.Kind, owner component.ID, name string) string {
	return fmt.Sprintf("%s_%s_%s_%s", strings.ToLower(kind.String()), owner.Type(), owner.Name(), name)
}

// FileName names the journal of a component's storage client after the
// client's file, unsafe characters written as ~ and their code point as
// file_storage writes them. The journal_ prefix keeps storage_check, which
// opens every file named <kind>_... as a bbolt file, away from it.
func FileName(kind component.Kind, owner component.ID, name string) string {
	var b strings.Builder
	b.WriteString("journal_")
	for _, r := range StorageClientName(kind, owner, name) {
		if r < 0x80 && (r == '.' || r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r)) {
			b.WriteRune(r)
		} else {
			fmt.Fprintf(&b, "~%04X", r)
		}
	}
	return b.String()
}

// OpenFor opens the journal of a component's storage client named name in
// cfg.Directory (created if missing) in front of base, after writing into
// base what a previous process left in it, and logs what that replay found;
// what names the state in the log ("derivation state"). It returns the
// journal's path. field names the configuration of the journal in errors.
func OpenFor(ctx context.Context, base storage.Client, cfg Config, kind component.Kind, owner component.ID, name, field, what string, logger *zap.Logger) (*Client, string, error) {
	if err := os.MkdirAll(cfg.Directory, 0o750); err != nil {
		return nil, "", fmt.Errorf("%s.directory: %w", field, err)
	}
	path := filepath.Join(cfg.Directory, FileName(kind, owner, name))
	jc, replay, err := Open(ctx, base, path, cfg)
	if err != nil {
		return nil, path, fmt.Errorf("%s: %w", field, err)
	}
	switch {
	case replay.Err != nil:
		logger.Warn("Set aside a "+what+" journal that could not be read; its batches are lost",
			zap.String("journal", path), zap.Int64("bytes", replay.DiscardedBytes), zap.Error(replay.Err))
	case replay.DiscardedBytes > 0:
		logger.Warn("Discarded the incomplete last record of the "+what+" journal (a write cut short by a crash or a full disk)",
			zap.String("journal", path), zap.Int("records", replay.Records), zap.Int64("bytes", replay.DiscardedBytes))
	case replay.Records > 0:
		logger.Info("Wrote the "+what+" journal left by the previous process into the storage",
			zap.String("journal", path), zap.Int("records", replay.Records))
	}
	return jc, path, nil
}
