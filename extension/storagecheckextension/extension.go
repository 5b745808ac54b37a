// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package storagecheckextension // import "github.com/gpubuild/otelcol-gpubuild/extension/storagecheckextension"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
	"go.opentelemetry.io/collector/component"
	"go.uber.org/zap"
)

// damagedSuffix marks a file moved aside, after its timestamp.
const damagedSuffix = ".damaged"

type storageCheck struct {
	cfg    *Config
	logger *zap.Logger
	now    func() time.Time
}

// Start checks every storage file before any component opens it (file_storage
// opens them when a component asks for a client, after all extensions have
// started). A file that cannot be opened or read is renamed, not deleted, so
// it can still be examined; its data is lost to the collector either way.
func (s *storageCheck) Start(context.Context, component.Host) error {
	entries, err := os.ReadDir(s.cfg.Directory)
	if errors.Is(err, os.ErrNotExist) {
		return nil // file_storage creates it
	}
	if err != nil {
		return fmt.Errorf("storage_check: reading %s: %w", s.cfg.Directory, err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || !isStorageFile(e.Name()) {
			continue
		}
		path := filepath.Join(s.cfg.Directory, e.Name())
		checkErr := checkFile(path, s.cfg.OpenTimeout)
		if checkErr == nil {
			continue
		}
		if errors.Is(checkErr, os.ErrPermission) {
			return fmt.Errorf("storage_check: %s cannot be read: %w", path, checkErr)
		}
		if errors.Is(checkErr, bolterrors.ErrTimeout) {
			s.logger.Warn("A storage file is locked by another process; left as it is", zap.String("file", path))
			continue
		}
		aside := path + "." + s.now().UTC().Format("20060102T150405.000Z") + damagedSuffix
		if err := os.Rename(path, aside); err != nil {
			return fmt.Errorf("storage_check: %s is damaged (%v) and cannot be moved aside: %w", path, checkErr, err)
		}
		s.logger.Error("A damaged storage file was moved aside; a fresh one is started and what it held (queued data or state) is lost",
			zap.String("file", path), zap.String("moved_to", aside), zap.Error(checkErr))
	}
	return nil
}

func (*storageCheck) Shutdown(context.Context) error { return nil }

// checkFile opens path read-only and reads every bucket, key and value,
// as the queue and state would on start. bbolt panics on some damage; the
// panic happens in this goroutine (tx.Check would run the walk in one of
// its own, where a panic cannot be recovered) and is reported as an error.
func checkFile(path string, timeout time.Duration) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("bbolt panicked reading the file: %v", r)
		}
	}()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: timeout})
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	return db.View(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(_ []byte, b *bbolt.Bucket) error { return walk(b) })
	})
}

func walk(b *bbolt.Bucket) error {
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v == nil { // a nested bucket
			if nested := b.Bucket(k); nested != nil {
				if err := walk(nested); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
