// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package nvmlreceiver

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
)

const (
	idA = "4c6b2a1f0e9d8c7b6a5f4e3d2c1b0a99887766554433221100ffeeddccbbaa00"
	idB = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

func TestContainerIDFromCgroup(t *testing.T) {
	tests := []struct {
		name   string
		cgroup string
		want   string
	}{
		{
			name: "cgroup v1 docker cgroupfs",
			cgroup: "12:pids:/docker/" + idA + "\n" +
				"11:memory:/docker/" + idA + "\n" +
				"1:name=systemd:/docker/" + idA + "\n",
			want: idA,
		},
		{
			name:   "cgroup v1 kubernetes cgroupfs",
			cgroup: "4:cpu,cpuacct:/kubepods/burstable/pod6f1d2c3b-1a2b-4c5d-8e9f-0a1b2c3d4e5f/" + idB + "\n",
			want:   idB,
		},
		{
			name:   "cgroup v1 containerd systemd with colon",
			cgroup: "3:devices:/system.slice/containerd.service/kubepods-besteffort-pod1a2b.slice:cri-containerd:" + idA + "\n",
			want:   idA,
		},
		{
			name:   "cgroup v2 docker systemd scope",
			cgroup: "0::/system.slice/docker-" + idB + ".scope\n",
			want:   idB,
		},
		{
			name:   "cgroup v2 kubernetes containerd",
			cgroup: "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6f1d2c3b_1a2b_4c5d_8e9f_0a1b2c3d4e5f.slice/cri-containerd-" + idA + ".scope\n",
			want:   idA,
		},
		{
			name:   "cgroup v2 kubernetes cri-o",
			cgroup: "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1234.slice/crio-" + idB + ".scope\n",
			want:   idB,
		},
		{
			name:   "cgroup v2 podman nested",
			cgroup: "0::/machine.slice/libpod-" + idA + ".scope/container\n",
			want:   idA,
		},
		{
			name:   "cgroup v2 seen from another cgroup namespace",
			cgroup: "0::/../../kubepods.slice/kubepods-pod1.slice/cri-containerd-" + idB + ".scope\n",
			want:   idB,
		},
		{
			name: "hybrid v1 and v2",
			cgroup: "12:memory:/docker/" + idA + "\n" +
				"0::/system.slice/docker-" + idA + ".scope\n",
			want: idA,
		},
		{
			name:   "not in a container: user session",
			cgroup: "0::/user.slice/user-1000.slice/session-3.scope\n",
			want:   "",
		},
		{
			name:   "not in a container: systemd service",
			cgroup: "0::/system.slice/nvidia-persistenced.service\n",
			want:   "",
		},
		{
			name:   "not in a container: v1 root",
			cgroup: "11:memory:/\n10:cpu:/user.slice\n",
			want:   "",
		},
		{
			name:   "inside own cgroup namespace",
			cgroup: "0::/\n",
			want:   "",
		},
		{
			name:   "64 characters that are not hex",
			cgroup: "0::/docker/" + "zz" + idA[2:] + "\n",
			want:   "",
		},
		{name: "empty", cgroup: "", want: ""},
		{name: "garbage", cgroup: "no colons here\n:\n", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, containerIDFromCgroup([]byte(tt.cgroup)))
		})
	}
}

func TestProcessResolverCachesWhileSeen(t *testing.T) {
	fsys := fstest.MapFS{
		"42/comm":   {Data: []byte("python3\n")},
		"42/cgroup": {Data: []byte("0::/system.slice/docker-" + idA + ".scope\n")},
		"43/comm":   {Data: []byte("faiss_build\n")},
	}
	r := newProcessResolver(fsys)

	r.beginScrape()
	info, ok := r.lookup(42)
	assert.True(t, ok)
	assert.Equal(t, processInfo{executable: "python3", containerID: idA}, info)
	info, ok = r.lookup(43)
	assert.True(t, ok, "a missing cgroup file only loses the container id")
	assert.Equal(t, processInfo{executable: "faiss_build"}, info)
	_, ok = r.lookup(44)
	assert.False(t, ok, "no /proc entry: skipped")
	r.endScrape()

	// Served from the cache while the PID stays on the GPU...
	delete(fsys, "42/comm")
	r.beginScrape()
	info, ok = r.lookup(42)
	assert.True(t, ok)
	assert.Equal(t, "python3", info.executable)
	r.endScrape()

	// ...and forgotten once a scrape no longer sees it.
	r.beginScrape()
	r.endScrape()
	r.beginScrape()
	_, ok = r.lookup(42)
	assert.False(t, ok)
	r.endScrape()
}
