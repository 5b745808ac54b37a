// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package statedir is the gateway's state directory on disk: the receipt
// journal's segments (internal/receipts) and the identities snapshot
// (internal/identities), and the renames that keep them consistent across
// a kill: a segment handed on is renamed aside before it is removed, a
// snapshot is written beside the old one and renamed over it, and a file
// that cannot be read is set aside rather than deleted.
package statedir // import "github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor/internal/statedir"

import (
	"errors"
	"os"
	"path/filepath"
)

// Suffixes of the files set aside.
const (
	// TakenSuffix marks a segment whose interval was taken; one left by a
	// killed process is removed at Open, never read.
	TakenSuffix = ".taken"
	// DamagedSuffix marks an identities snapshot that could not be read.
	DamagedSuffix = ".damaged"
	// UnknownFormatSuffix marks a file written by a later version.
	UnknownFormatSuffix = ".unknown-format"
)

// Dir is one gateway's state directory.
type Dir struct {
	dir, segments, identities string
	fsync                     bool
}

// Open creates dir when missing and removes the segments a killed process
// had renamed aside as taken. segments is the segments' name prefix,
// identities the snapshot's file name; fsync syncs each snapshot.
func Open(dir, segments, identities string, fsync bool) (*Dir, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	if taken, err := filepath.Glob(filepath.Join(dir, segments+"_*"+TakenSuffix)); err == nil {
		for _, f := range taken {
			_ = os.Remove(f)
		}
	}
	return &Dir{dir: dir, segments: segments, identities: filepath.Join(dir, identities), fsync: fsync}, nil
}

// Path is the directory.
func (d *Dir) Path() string { return d.dir }

// Segments is the segments' name prefix.
func (d *Dir) Segments() string { return d.segments }

// IdentitiesPath is the snapshot's path.
func (d *Dir) IdentitiesPath() string { return d.identities }

// ReadIdentities reads the snapshot; nil without error when there is none.
func (d *Dir) ReadIdentities() ([]byte, error) {
	b, err := os.ReadFile(d.identities)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// SetAsideIdentities renames a snapshot that could not be read.
func (d *Dir) SetAsideIdentities() { _ = os.Rename(d.identities, d.identities+DamagedSuffix) }

// WriteIdentities replaces the snapshot: written beside it, then renamed
// over it, so a kill leaves the old one or the new one whole.
func (d *Dir) WriteIdentities(snap []byte) error {
	tmp := d.identities + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(snap)
	if err == nil && d.fsync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, d.identities)
}

// SetAsideUnknownFormat renames a segment written by a later version, kept
// for it.
func SetAsideUnknownFormat(segment string) { _ = os.Rename(segment, segment+UnknownFormatSuffix) }

// Take renames a segment whose interval was handed on aside, in one rename
// (what a kill before it leaves is sent again at the next start), and
// returns the name to Remove once the identities are saved.
func Take(segment string) (string, error) {
	taken := segment + TakenSuffix
	return taken, os.Rename(segment, taken)
}

// Remove removes a file set aside or emptied.
func Remove(path string) { _ = os.Remove(path) }
