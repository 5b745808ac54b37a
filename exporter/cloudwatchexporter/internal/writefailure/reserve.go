// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package writefailure // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/writefailure"

import (
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// exporterhelper's persistent queue writes to its
// storage to hand over a request (its read index) and to delete a sent
// one; on a full volume those writes fail and it drops the request. A
// reserve file in the queue's directory keeps room for them: when the
// volume's free space falls under the reserve's size, the reserve is
// deleted, and new data is held in memory (writefailure.go) until the
// volume has room for it beyond a reserve again or the queue is empty.

// writeReserveName is the reserve file in write_reserve_directory; it is
// no storage file (storage_check leaves it alone).
const writeReserveName = "cloudwatch-write-reserve"

// writeReserve is the reserve file. Used with the turn held.
type writeReserve struct {
	path    string
	size    int64
	inPlace bool
	// lastFree is what the last look at the volume found (0: unknown).
	lastFree int64
	// statfs reads the volume's figures (unix.Statfs; counted in tests).
	statfs func(path string, st *unix.Statfs_t) error
}

func newWriteReserve(dir string, size int64) *writeReserve {
	return &writeReserve{path: filepath.Join(dir, writeReserveName), size: size, statfs: unix.Statfs}
}

// volumeBytes is the size of the volume holding dir.
func volumeBytes(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Blocks) * st.Bsize, nil
}

// volumeTooSmall tells whether a volume of volume bytes cannot hold a queue
// at its byte cap beside the write reserve. The queue's file is larger
// than the serialized requests it holds (bbolt pages, free lists), so the
// cap itself is not the file's size: this check catches the clear cases.
func volumeTooSmall(volume, queueCap, reserve int64) bool {
	return volume > 0 && volume < queueCap+reserve
}

// free is the space left on the reserve's volume for an unprivileged writer.
func (r *writeReserve) free() (int64, error) {
	var st unix.Statfs_t
	if err := r.statfs(filepath.Dir(r.path), &st); err != nil {
		r.lastFree = 0
		return 0, err
	}
	r.lastFree = int64(st.Bavail) * st.Bsize
	return r.lastFree, nil
}

// create writes the reserve (real blocks, not a sparse file) when the
// volume has room for it and as much again beside it.
func (r *writeReserve) create() error {
	if r.inPlace {
		return nil
	}
	free, err := r.free()
	if err != nil {
		return err
	}
	if free < 2*r.size {
		return errors.New("not enough free space")
	}
	f, err := os.OpenFile(r.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	chunk := make([]byte, 1<<20)
	var written int64
	for written < r.size && err == nil {
		var n int
		n, err = f.Write(chunk[:min(int64(len(chunk)), r.size-written)])
		written += int64(n)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(r.path)
		return err
	}
	r.inPlace = true
	return nil
}

// releaseIfLow deletes the reserve when the volume's free space is under
// its size; it reports whether it did.
func (r *writeReserve) releaseIfLow() (bool, error) {
	if !r.inPlace {
		return false, nil
	}
	free, err := r.free()
	if err != nil || free >= r.size {
		return false, err
	}
	if err := os.Remove(r.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	r.inPlace = false
	return true, nil
}

// release deletes the reserve.
func (r *writeReserve) release() error {
	r.inPlace = false
	if err := os.Remove(r.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// roomFor tells whether n more bytes can be written leaving a reserve's
// worth of space free.
func (r *writeReserve) roomFor(n int64) bool {
	free, err := r.free()
	return err == nil && free >= r.size+n
}
