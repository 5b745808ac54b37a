// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package distro

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/gpubuild/otelcol-gpubuild/internal/confmap/metricsswitch"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
)

// The deployment files must agree with the config and the build: same image
// and version, same ports, and only environment variables the config reads.

func readFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(binarytest.RepoRoot(), rel))
	require.NoError(t, err)
	return string(b)
}

func decodeYAML(t *testing.T, rel string, into any) {
	t.Helper()
	require.NoError(t, yaml.Unmarshal([]byte(readFile(t, rel)), into), rel)
}

// configDefaults returns the defaults of the ${env:NAME:-default} references in otelcol-config.yaml.
func configDefaults(t *testing.T) map[string]string {
	re := regexp.MustCompile(`\$\{env:([A-Z0-9_]+)(?::-([^}]*))?\}`)
	out := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(readFile(t, "otelcol-config.yaml"), -1) {
		out[m[1]] = m[2]
	}
	return out
}

func expectedImage(t *testing.T) string {
	var builder struct {
		Dist struct {
			Name    string `yaml:"name"`
			Version string `yaml:"version"`
		} `yaml:"dist"`
	}
	decodeYAML(t, "builder-config.yaml", &builder)
	return "ghcr.io/gpubuild/" + builder.Dist.Name + ":" + builder.Dist.Version
}

// knownEnv says whether the sidecar reads an environment variable: the
// config's own, the metrics switch, or the AWS SDK's, NVIDIA runtime's and
// Go runtime's.
func knownEnv(defaults map[string]string, name string) bool {
	if _, ok := defaults[name]; ok || name == metricsswitch.EnvVar {
		return true
	}
	return slices.Contains([]string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
		"NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "GOMEMLIMIT"}, name)
}

// requireMemoryHeadroom checks that the container's memory limit leaves the
// 64 MiB above the heap limit (the admission extension's memory.limit_mib)
// that the binary and runtime need
// (measured in BENCHMARKS.md): otherwise the kernel kills the sidecar before
// the heap check ever refuses data.
func requireMemoryHeadroom(t *testing.T, heapLimitMiB, containerLimit string) {
	t.Helper()
	heap, err := strconv.Atoi(heapLimitMiB)
	require.NoError(t, err, "GPUBUILD_MEMORY_LIMIT_MIB")
	unit := map[string]int{"Mi": 1, "M": 1, "Gi": 1024, "G": 1024}
	re := regexp.MustCompile(`^(\d+)(Mi|M|Gi|G)$`)
	m := re.FindStringSubmatch(containerLimit)
	require.NotNil(t, m, "container memory limit %q", containerLimit)
	n, _ := strconv.Atoi(m[1])
	assert.GreaterOrEqual(t, n*unit[m[2]], heap+64, "container limit %s vs heap limit %d MiB", containerLimit, heap)
}

// shutdownBudget is the longest a SIGTERM'd sidecar takes on the default
// config: the buildjob connector's final flush (retried up to one flush
// interval), the exporter's queue drain, and one request's timeout (a request
// in flight is awaited up to request_timeout, past the export's timeout).
func shutdownBudget(t *testing.T, defaults map[string]string) time.Duration {
	var cfg struct {
		Exporters struct {
			CloudWatch struct {
				Timeout        string `yaml:"timeout"`
				RequestTimeout string `yaml:"request_timeout"`
			} `yaml:"cloudwatch"`
		} `yaml:"exporters"`
	}
	decodeYAML(t, "otelcol-config.yaml", &cfg)
	parse := func(v string) time.Duration {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, "%q", v)
		return d
	}
	request := max(parse(cfg.Exporters.CloudWatch.Timeout), parse(cfg.Exporters.CloudWatch.RequestTimeout))
	return parse(defaults["GPUBUILD_FLUSH_INTERVAL"]) + parse(defaults["GPUBUILD_SHUTDOWN_DRAIN_TIMEOUT"]) + request
}

func defaultPort(t *testing.T, defaults map[string]string, name string) int {
	p, err := strconv.Atoi(defaults[name])
	require.NoError(t, err, "%s has no numeric default in otelcol-config.yaml", name)
	return p
}

func TestDockerfile(t *testing.T) {
	df := readFile(t, "Dockerfile")
	defaults := configDefaults(t)

	var stages []string
	var exposed []int
	var user string
	for _, line := range strings.Split(df, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM":
			stages = append(stages, f[1])
		case "EXPOSE":
			for _, p := range f[1:] {
				n, err := strconv.Atoi(p)
				require.NoError(t, err)
				exposed = append(exposed, n)
			}
		case "USER":
			user = f[1]
		}
	}
	require.GreaterOrEqual(t, len(stages), 2, "multi-stage build")
	runtimeImage := stages[len(stages)-1]
	assert.NotContains(t, runtimeImage, "scratch", "go-nvml dlopens libnvidia-ml: glibc needed")
	assert.NotContains(t, runtimeImage, "alpine", "go-nvml dlopens libnvidia-ml: glibc needed")
	assert.Contains(t, df, "RUN make build", "the image builds the way CI does")

	require.NotEmpty(t, user, "runtime stage sets USER")
	uid, _, _ := strings.Cut(user, ":")
	assert.NotEqual(t, "0", uid)
	assert.NotEqual(t, "root", uid)

	assert.ElementsMatch(t, []int{
		defaultPort(t, defaults, "GPUBUILD_OTLP_GRPC_PORT"),
		defaultPort(t, defaults, "GPUBUILD_OTLP_HTTP_PORT"),
		defaultPort(t, defaults, "GPUBUILD_HEALTH_PORT"),
	}, exposed)
	assert.Contains(t, df, "HEALTHCHECK")
	assert.Contains(t, df, "NVIDIA_DRIVER_CAPABILITIES=utility")
	assert.Contains(t, df, "GPUBUILD_QUEUE_DIR="+defaults["GPUBUILD_QUEUE_DIR"], "the queue lives where the config and the volume say")
}

func TestDockerCompose(t *testing.T) {
	var compose struct {
		Services map[string]struct {
			Image           string            `yaml:"image"`
			StopGracePeriod string            `yaml:"stop_grace_period"`
			NetworkMode     string            `yaml:"network_mode"`
			Environment     map[string]string `yaml:"environment"`
			Volumes         []string          `yaml:"volumes"`
			Healthcheck     struct {
				Test []string `yaml:"test"`
			} `yaml:"healthcheck"`
			Deploy struct {
				Resources struct {
					Limits struct {
						Memory string `yaml:"memory"`
					} `yaml:"limits"`
				} `yaml:"resources"`
			} `yaml:"deploy"`
		} `yaml:"services"`
	}
	decodeYAML(t, "deploy/docker-compose.yaml", &compose)
	defaults := configDefaults(t)

	sidecar, ok := compose.Services["otelcol-gpubuild"]
	require.True(t, ok)
	assert.Equal(t, expectedImage(t), sidecar.Image)
	for name := range sidecar.Environment {
		assert.True(t, knownEnv(defaults, name), "compose sets %s, which the sidecar does not read", name)
	}
	assert.Contains(t, sidecar.Environment, metricsswitch.EnvVar)
	assert.Contains(t, sidecar.Volumes, "otelcol-queue:"+defaults["GPUBUILD_QUEUE_DIR"])
	assert.Contains(t, sidecar.Healthcheck.Test, "/usr/local/bin/healthprobe")
	requireMemoryHeadroom(t, sidecar.Environment["GPUBUILD_MEMORY_LIMIT_MIB"], sidecar.Deploy.Resources.Limits.Memory)
	grace, err := time.ParseDuration(sidecar.StopGracePeriod)
	require.NoError(t, err, "stop_grace_period")
	assert.Greater(t, grace, shutdownBudget(t, defaults), "SIGTERM must have time to flush before SIGKILL")

	service, ok := compose.Services["index-builder"]
	require.True(t, ok)
	assert.Equal(t, "http://127.0.0.1:"+defaults["GPUBUILD_OTLP_GRPC_PORT"], service.Environment["OTEL_EXPORTER_OTLP_ENDPOINT"])
	assert.Equal(t, "grpc", service.Environment["OTEL_EXPORTER_OTLP_PROTOCOL"])
}

type k8sProbe struct {
	Exec struct {
		Command []string `yaml:"command"`
	} `yaml:"exec"`
}

type k8sContainer struct {
	Name          string `yaml:"name"`
	Image         string `yaml:"image"`
	RestartPolicy string `yaml:"restartPolicy"`
	Env           []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
	Ports []struct {
		ContainerPort int `yaml:"containerPort"`
	} `yaml:"ports"`
	LivenessProbe   *k8sProbe `yaml:"livenessProbe"`
	ReadinessProbe  *k8sProbe `yaml:"readinessProbe"`
	StartupProbe    *k8sProbe `yaml:"startupProbe"`
	SecurityContext struct {
		RunAsUser int64 `yaml:"runAsUser"`
	} `yaml:"securityContext"`
	Resources struct {
		Limits map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	VolumeMounts []struct {
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

func TestKubernetesPod(t *testing.T) {
	var pod struct {
		Kind string `yaml:"kind"`
		Spec struct {
			TerminationGracePeriodSeconds int            `yaml:"terminationGracePeriodSeconds"`
			InitContainers                []k8sContainer `yaml:"initContainers"`
			Containers                    []k8sContainer `yaml:"containers"`
		} `yaml:"spec"`
	}
	decodeYAML(t, "deploy/kubernetes/pod.yaml", &pod)
	defaults := configDefaults(t)
	require.Equal(t, "Pod", pod.Kind)
	assert.Greater(t, time.Duration(pod.Spec.TerminationGracePeriodSeconds)*time.Second, shutdownBudget(t, defaults),
		"SIGTERM must have time to flush before SIGKILL")
	require.Len(t, pod.Spec.InitContainers, 1)

	sidecar := pod.Spec.InitContainers[0]
	assert.Equal(t, "Always", sidecar.RestartPolicy, "native sidecar")
	assert.Equal(t, expectedImage(t), sidecar.Image)
	assert.NotZero(t, sidecar.SecurityContext.RunAsUser, "non-root")
	var ports []int
	for _, p := range sidecar.Ports {
		ports = append(ports, p.ContainerPort)
	}
	assert.ElementsMatch(t, []int{
		defaultPort(t, defaults, "GPUBUILD_OTLP_GRPC_PORT"),
		defaultPort(t, defaults, "GPUBUILD_OTLP_HTTP_PORT"),
		defaultPort(t, defaults, "GPUBUILD_HEALTH_PORT"),
	}, ports)
	envNames := map[string]bool{}
	for _, e := range sidecar.Env {
		envNames[e.Name] = true
		assert.True(t, knownEnv(defaults, e.Name), "pod sets %s, which the sidecar does not read", e.Name)
	}
	assert.True(t, envNames[metricsswitch.EnvVar])
	heapLimit := defaults["GPUBUILD_MEMORY_LIMIT_MIB"]
	for _, e := range sidecar.Env {
		if e.Name == "GPUBUILD_MEMORY_LIMIT_MIB" {
			heapLimit = e.Value
		}
	}
	requireMemoryHeadroom(t, heapLimit, sidecar.Resources.Limits["memory"])
	for name, probe := range map[string]*k8sProbe{"liveness": sidecar.LivenessProbe, "readiness": sidecar.ReadinessProbe, "startup": sidecar.StartupProbe} {
		require.NotNil(t, probe, "%s probe", name)
		assert.Equal(t, []string{"/usr/local/bin/healthprobe"}, probe.Exec.Command, "%s probe", name)
	}
	require.Len(t, sidecar.VolumeMounts, 1)
	assert.Equal(t, defaults["GPUBUILD_QUEUE_DIR"], sidecar.VolumeMounts[0].MountPath)

	require.Len(t, pod.Spec.Containers, 1)
	service := pod.Spec.Containers[0]
	assert.Contains(t, service.Resources.Limits, "nvidia.com/gpu")
	var endpoint string
	for _, e := range service.Env {
		if e.Name == "OTEL_EXPORTER_OTLP_ENDPOINT" {
			endpoint = e.Value
		}
	}
	assert.Equal(t, "http://127.0.0.1:"+defaults["GPUBUILD_OTLP_GRPC_PORT"], endpoint)
}

// The sidecar must be up and healthy before the service sends its first
// byte: what an OTLP exporter sends to a closed port is dropped.
func TestDeployStartOrderCompose(t *testing.T) {
	type dependency struct {
		Condition string `yaml:"condition"`
	}
	var compose struct {
		Services map[string]struct {
			NetworkMode string         `yaml:"network_mode"`
			DependsOn   yaml.Node      `yaml:"depends_on"`
			Ports       []string       `yaml:"ports"`
			Healthcheck map[string]any `yaml:"healthcheck"`
		} `yaml:"services"`
	}
	decodeYAML(t, "deploy/docker-compose.yaml", &compose)
	sidecar, service := compose.Services["otelcol-gpubuild"], compose.Services["index-builder"]

	assert.Empty(t, sidecar.NetworkMode, "the collector owns the network namespace")
	assert.Zero(t, sidecar.DependsOn.Kind, "the collector depends on nothing")
	assert.NotEmpty(t, sidecar.Healthcheck["test"], "service_healthy needs a healthcheck")
	assert.NotEmpty(t, sidecar.Ports, "the namespace owner publishes the service's API")
	assert.Equal(t, "service:otelcol-gpubuild", service.NetworkMode, "the service joins the collector's namespace")
	assert.Empty(t, service.Ports, "a service in another's namespace cannot publish ports")

	// The short list form ([otelcol-gpubuild]) only waits for the container
	// to start, not for OTLP to listen: the long form with a condition is required.
	require.Equal(t, yaml.MappingNode, service.DependsOn.Kind, "depends_on must use the long form with a condition")
	var deps map[string]dependency
	require.NoError(t, service.DependsOn.Decode(&deps))
	require.Contains(t, deps, "otelcol-gpubuild")
	assert.Equal(t, "service_healthy", deps["otelcol-gpubuild"].Condition)
}

func TestDeployStartOrderKubernetes(t *testing.T) {
	var pod struct {
		Spec struct {
			InitContainers []k8sContainer `yaml:"initContainers"`
			Containers     []k8sContainer `yaml:"containers"`
		} `yaml:"spec"`
	}
	decodeYAML(t, "deploy/kubernetes/pod.yaml", &pod)
	// Init containers start in order before any regular container; a native
	// sidecar (restartPolicy: Always) lets the next one start only after its
	// startup probe succeeds, and stops after the regular containers.
	require.NotEmpty(t, pod.Spec.InitContainers)
	idx := slices.IndexFunc(pod.Spec.InitContainers, func(c k8sContainer) bool { return c.Name == "otelcol-gpubuild" })
	require.GreaterOrEqual(t, idx, 0, "the collector is an init container")
	sidecar := pod.Spec.InitContainers[idx]
	assert.Equal(t, "Always", sidecar.RestartPolicy, "native sidecar, not a one-shot init container")
	require.NotNil(t, sidecar.StartupProbe, "without a startup probe the service starts as soon as the sidecar's process does")
	assert.NotEmpty(t, sidecar.StartupProbe.Exec.Command)
	for _, c := range pod.Spec.InitContainers[:idx] {
		assert.Equal(t, "Always", c.RestartPolicy, "init container %s before the sidecar would delay it, never the service", c.Name)
	}
	for _, c := range pod.Spec.Containers {
		assert.NotEqual(t, "otelcol-gpubuild", c.Name, "the collector must not also be a regular container")
	}
	require.Len(t, pod.Spec.Containers, 1)
}
