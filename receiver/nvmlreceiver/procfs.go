// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package nvmlreceiver // import "github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver"

import (
	"bytes"
	"io/fs"
	"strconv"
	"strings"
)

// processInfo is what /proc tells about a GPU process.
type processInfo struct {
	executable  string
	containerID string
}

type processEntry struct {
	info processInfo
	seen uint64 // scrape generation that last saw the PID
}

// processResolver reads /proc/<pid>/comm and /proc/<pid>/cgroup, caching
// them while the PID stays on a GPU. A PID reused within one collection
// interval keeps the old attribution until it leaves the GPU.
type processResolver struct {
	fsys       fs.FS // rooted at /proc
	cache      map[uint32]*processEntry
	generation uint64
}

func newProcessResolver(fsys fs.FS) *processResolver {
	return &processResolver{fsys: fsys, cache: make(map[uint32]*processEntry)}
}

func (r *processResolver) beginScrape() { r.generation++ }

// endScrape forgets the PIDs no GPU reported in this scrape.
func (r *processResolver) endScrape() {
	for pid, e := range r.cache {
		if e.seen != r.generation {
			delete(r.cache, pid)
		}
	}
}

// lookup returns the process' attributes. false means /proc has no such
// PID: the process exited since NVML listed it, or the collector does not
// share the host PID namespace.
func (r *processResolver) lookup(pid uint32) (processInfo, bool) {
	if e, ok := r.cache[pid]; ok {
		e.seen = r.generation
		return e.info, true
	}
	dir := strconv.FormatUint(uint64(pid), 10)
	comm, err := fs.ReadFile(r.fsys, dir+"/comm")
	if err != nil {
		return processInfo{}, false
	}
	info := processInfo{executable: string(bytes.TrimRight(comm, "\n"))}
	if cgroup, err := fs.ReadFile(r.fsys, dir+"/cgroup"); err == nil {
		info.containerID = containerIDFromCgroup(cgroup)
	}
	r.cache[pid] = &processEntry{info: info, seen: r.generation}
	return info, true
}

// containerIDFromCgroup finds a container id in a /proc/<pid>/cgroup file.
// Lines are "hierarchy-id:controllers:path" (cgroup v1) or "0::path"
// (cgroup v2). Runtimes put the 64-hex-digit container id in the last path
// segments, e.g.
//
//	/docker/<id>                                  (docker, cgroupfs driver)
//	/system.slice/docker-<id>.scope               (docker, systemd driver)
//	/kubepods/burstable/pod<uid>/<id>             (kubernetes, cgroupfs driver)
//	/kubepods.slice/.../cri-containerd-<id>.scope (kubernetes + containerd, systemd)
//	/kubepods.slice/.../crio-<id>.scope           (kubernetes + CRI-O)
//	/machine.slice/libpod-<id>.scope              (podman)
//
// It returns "" for processes outside containers (/user.slice/...,
// /init.scope, /).
func containerIDFromCgroup(data []byte) string {
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		// The path is everything after the second colon.
		i := bytes.IndexByte(line, ':')
		if i < 0 {
			continue
		}
		j := bytes.IndexByte(line[i+1:], ':')
		if j < 0 {
			continue
		}
		if id := containerIDFromPath(string(line[i+1+j+1:])); id != "" {
			return id
		}
	}
	return ""
}

// containerIDFromPath scans the cgroup path from its last segment up.
func containerIDFromPath(path string) string {
	for path != "" {
		seg := path
		if i := strings.LastIndexByte(path, '/'); i >= 0 {
			seg, path = path[i+1:], path[:i]
		} else {
			path = ""
		}
		seg = strings.TrimSuffix(seg, ".scope")
		// Runtime prefixes end with '-' (docker-, cri-containerd-, crio-,
		// libpod-) or ':' (cri-containerd:<id> in some cgroup v1 layouts).
		if i := strings.LastIndexAny(seg, "-:"); i >= 0 {
			seg = seg[i+1:]
		}
		if isContainerID(seg) {
			return seg
		}
	}
	return ""
}

func isContainerID(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
