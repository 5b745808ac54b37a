# otelcol-gpubuild. `make run` and `make test` are the two commands a
# newcomer needs; everything they need (ocb, mdatagen) is built here from the
# pinned tools module internal/tools, into .tools/bin.

SHELL        := /bin/bash
.SHELLFLAGS  := -eu -o pipefail -c
GO           ?= go
TOOLS_BIN    := $(CURDIR)/.tools/bin
OCB          := $(TOOLS_BIN)/builder
MDATAGEN     := $(TOOLS_BIN)/mdatagen
GOLANGCI_LINT := $(TOOLS_BIN)/golangci-lint
BIN          := bin/otelcol-gpubuild
COMPONENTS   := receiver/nvmlreceiver receiver/pipelinehealthreceiver processor/buildjobprocessor processor/intervalmergeprocessor processor/requestidprocessor processor/temporalityprocessor connector/buildjobconnector connector/fanoutconnector exporter/cloudwatchexporter extension/storagecheckextension extension/admissionextension extension/nvmlsamplerextension
RUN_DIR      := $(CURDIR)/.run
GO_TEST_TIMEOUT ?= 14m

export CGO_ENABLED := 1

.DEFAULT_GOAL := build
.PHONY: build run test unit-test schemas-deps lint generate check-generated bench bench-peers demo tools gpu-smoke clean deps promtool-check image image-deps jsservice-image compose-test container-test image-sbom arm64-deps build-arm64 fleet-production

## tools: build ocb and mdatagen at the versions pinned in internal/tools/go.mod (golangci-lint: internal/tools/lint, built by make lint)
tools: $(OCB) $(MDATAGEN)
$(OCB) $(MDATAGEN) &: internal/tools/go.mod internal/tools/go.sum
	cd internal/tools && $(GO) build -o $(TOOLS_BIN)/ \
		go.opentelemetry.io/collector/cmd/builder \
		go.opentelemetry.io/collector/cmd/mdatagen
	@touch $(OCB) $(MDATAGEN)
# golangci-lint has a module of its own so that its dependencies never move ours.
$(GOLANGCI_LINT): internal/tools/lint/go.mod internal/tools/lint/go.sum
	cd internal/tools/lint && $(GO) build -o $(TOOLS_BIN)/ github.com/golangci/golangci-lint/v2/cmd/golangci-lint
	@touch $(GOLANGCI_LINT)

## generate: regenerate mdatagen code of each component and the ocb sources in distro/
generate: tools
	for c in $(COMPONENTS); do (cd $$c && $(MDATAGEN) metadata.yaml); done
	$(OCB) --config builder-config.yaml --skip-compilation

## check-generated: fail when committed generated code differs from what the pinned tools produce
check-generated: generate
	@if [ -n "$$(git status --porcelain -- distro $(addsuffix /internal/metadata,$(COMPONENTS)) $(addsuffix /documentation.md,$(COMPONENTS)) $(addsuffix /generated_component_test.go,$(COMPONENTS)) $(addsuffix /generated_package_test.go,$(COMPONENTS)))" ]; then \
		echo "generated code is stale: run 'make generate' and commit the result" >&2; \
		git status --porcelain -- distro $(COMPONENTS) >&2; git diff --stat >&2; exit 1; fi
	@echo "generated code is up to date"

## build: compile the distribution into bin/otelcol-gpubuild (cgo on: NVML)
build: $(BIN) bin/healthprobe
bin/healthprobe: cmd/healthprobe/main.go
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $@ ./cmd/healthprobe
$(BIN): $(shell find . -name '*.go' -not -path './.tools/*' -not -path './.run/*' 2>/dev/null) go.mod go.sum distro/go.mod distro/go.sum
	cd distro && $(GO) build -trimpath -ldflags '-s -w' -o ../$(BIN) .

## run: build and run the sidecar on the default config (dry run without AWS credentials)
run: build
	mkdir -p $(RUN_DIR)/queue
	GPUBUILD_QUEUE_DIR=$${GPUBUILD_QUEUE_DIR:-$(RUN_DIR)/queue} ./$(BIN) --config otelcol-config.yaml

## test: every test: generated code fresh, lint, unit, component and end-to-end tests of the built binary, its image
## (test/container), deploy/docker-compose.yaml brought up (test/compose), deploy/ against AWS's and Kubernetes'
## schemas (test/schemas), its arm64 build under qemu (test/arm64), the Prometheus rules (promtool)
test: check-generated lint build jsservice-deps schemas-deps deps promtool-check image jsservice-image build-arm64
	$(GO) test -count=1 -timeout $(GO_TEST_TIMEOUT) ./...

## unit-test: the Go tests alone, without regenerating or rebuilding tools
unit-test: build jsservice-deps schemas-deps image jsservice-image build-arm64
	$(GO) test -count=1 -timeout $(GO_TEST_TIMEOUT) ./...

## deps: Debian packages the tests start themselves: the Prometheus server of test/destinations, the load balancer of test/fleet (pinned)
PROMETHEUS_DEB := 2.42.0+ds-5+deb12u1
HAPROXY_DEB    := 2.6.12-1+deb12u4
deps:
	@if ! command -v prometheus >/dev/null 2>&1; then \
		sudo=""; [ "$$(id -u)" -ne 0 ] && sudo="sudo"; \
		$$sudo apt-get update && $$sudo apt-get install -y --no-install-recommends prometheus=$(PROMETHEUS_DEB); \
	fi
	@if ! command -v haproxy >/dev/null 2>&1; then \
		sudo=""; [ "$$(id -u)" -ne 0 ] && sudo="sudo"; \
		$$sudo apt-get update && $$sudo apt-get install -y --no-install-recommends haproxy=$(HAPROXY_DEB); \
	fi

## promtool-check: deploy/prometheus: the example config and the rules (promtool check) and the rules' unit tests (promtool test rules)
promtool-check: deps
	promtool check config deploy/prometheus/prometheus.yml
	promtool check rules deploy/prometheus/gpubuild-rules.yaml
	promtool test rules deploy/prometheus/gpubuild-rules.test.yaml

## jsservice-deps: the Node.js build service's pinned npm packages (npm ci), driven by test/lifecycle
jsservice-deps: test/jsservice/node_modules/.package-lock.json
test/jsservice/node_modules/.package-lock.json: test/jsservice/package.json test/jsservice/package-lock.json
	cd test/jsservice && npm ci --no-audit --no-fund

## schemas-deps: the schema checkers' pinned npm packages (npm ci): the CloudFormation resource specification, the
## Kubernetes models, Grafana's schema, js-yaml and ajv, run by test/schemas against deploy/
schemas-deps: test/schemas/node_modules/.package-lock.json
test/schemas/node_modules/.package-lock.json: test/schemas/package.json test/schemas/package-lock.json
	cd test/schemas && npm ci --no-audit --no-fund

## lint: golangci-lint (.golangci.yml: gofmt, govet, errcheck, staticcheck, unused, revive, ...) and the build without cgo (the nvml receiver's fallback)
lint: $(GOLANGCI_LINT)
	$(GOLANGCI_LINT) run ./...
	CGO_ENABLED=0 $(GO) build ./...

## bench: Go benchmarks of the hot paths, then the load harness against the built binary
bench: build
	$(GO) test -run '^$$' -bench . -benchmem -count 1 ./receiver/... ./processor/... ./connector/... ./internal/buildjob/... ./exporter/...
	$(GO) test -run '^$$' -bench Destinations -benchtime 3x -count 1 ./test/destinations/
	$(GO) test -run '^$$' -bench . -benchtime 1x ./test/fleet/
	@if [ -d test/load ]; then $(GO) run ./test/load; fi

## fleet-production: the gateway tier at the shipped timings (60 s interval, 10 s flushes and GPU scrapes), 10 sidecars, kill -9 of a sidecar and a gateway, a worker 3 h ahead; then three gateways behind HAProxy (about 12 minutes; not in make test)
fleet-production: build
	$(GO) test -tags production -count=1 -timeout 20m -run 'TestFleetAtProductionTiming|TestFleetBehindLoadBalancerAtProductionTiming' -v ./test/fleet/

## bench-peers: otelcol-gpubuild beside the contrib assembly and a stock build, same loads, one run (not part of make test; about an hour: 3 rounds of 20 s took 55 minutes)
bench-peers: build tools
	$(GO) run ./test/load -peers -rounds 3 -duration 30s -warmup 8s -splice BENCHMARKS.md

## demo: buildsim -> the collector -> a local CloudWatch endpoint; prints what landed
demo: build
	@if [ -f scripts/demo.sh ]; then bash scripts/demo.sh; else echo "demo not available yet"; fi

## gpu-smoke: on a machine with NVIDIA GPUs and driver: the receiver on the real NVML (every metric, NVML's cost per step,
## utilization beside nvidia-smi's), the built distribution's GPU datums checked against nvidia-smi, the GPU sampler's
## CPU per GPU, and the GPU cost per run against the driver's energy counter (needs python3 with PyTorch for the load)
gpu-smoke: build
	$(GO) test -tags gpu -run 'TestGPUSmoke|TestDistributionOnRealGPU|TestSamplingCostOnRealGPU|TestGPUCostOnRealGPU' -v -count=1 \
		./receiver/nvmlreceiver/ ./test/nvml/ ./extension/nvmlsamplerextension/

## image: the sidecar image from the Dockerfile, built with podman (installed at pinned versions) on bases made from
## pinned Debian packages and the binaries of make build (no image registry needed): $(IMAGE)
IMAGE        ?= localhost/otelcol-gpubuild:dev
image-deps:
	bash scripts/image/deps.sh
image: build image-deps
	CONTAINERS_CONF=$${CONTAINERS_CONF:-$(CURDIR)/scripts/image/containers.conf} bash scripts/image/build.sh $(IMAGE)

## jsservice-image: the JavaScript SDK build service (test/jsservice) as a build service image on the same Debian-made
## runtime base, with Debian's Node.js from pinned packages: $(JSSERVICE_IMAGE), run by test/compose beside $(IMAGE)
JSSERVICE_IMAGE ?= localhost/gpubuild-jsservice:dev
jsservice-image: jsservice-deps image-deps
	CONTAINERS_CONF=$${CONTAINERS_CONF:-$(CURDIR)/scripts/image/containers.conf} bash scripts/image/jsservice.sh $(JSSERVICE_IMAGE)

## compose-test: deploy/docker-compose.yaml brought up with docker-compose over podman's socket (needs root)
compose-test: image jsservice-image
	OTELCOL_GPUBUILD_IMAGE=$(IMAGE) GPUBUILD_JSSERVICE_IMAGE=$(JSSERVICE_IMAGE) $(GO) test -count=1 -timeout 10m ./test/compose/

## image-sbom: the image's software bill of materials (Debian packages, Go modules of both binaries) into bin/image-sbom.txt
image-sbom: image
	CONTAINERS_CONF=$${CONTAINERS_CONF:-$(CURDIR)/scripts/image/containers.conf} bash scripts/image/sbom.sh $(IMAGE) > bin/image-sbom.txt
	@echo "bin/image-sbom.txt: $$(grep -c '^\s*dep' bin/image-sbom.txt) Go modules, $$(sed -n '/^## Debian/,/^$$/p' bin/image-sbom.txt | grep -vc '^#\|^$$') Debian packages"

## container-test: the image run as deployed (read-only, non-root, queue on a named volume): health, exact delivery,
## SIGTERM within the grace period (also while CloudWatch hangs), SIGKILL and restart, NVML injected (needs root)
container-test: image
	OTELCOL_GPUBUILD_IMAGE=$(IMAGE) $(GO) test -count=1 -timeout 15m ./test/container/

## build-arm64: bin/linux-arm64/ for AWS Graviton GPU instances (g5g): cgo through Debian's aarch64 cross gcc (pinned,
## installed by arm64-deps with qemu-user-static, which runs the arm64 binary in test/arm64)
ARM64_BIN := bin/linux-arm64
arm64-deps:
	bash scripts/image/arm64-deps.sh
build-arm64: $(ARM64_BIN)/otelcol-gpubuild $(ARM64_BIN)/healthprobe
$(ARM64_BIN)/healthprobe: cmd/healthprobe/main.go
	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $@ ./cmd/healthprobe
$(ARM64_BIN)/otelcol-gpubuild: $(BIN) | arm64-deps
	cd distro && GOOS=linux GOARCH=arm64 CC=aarch64-linux-gnu-gcc $(GO) build -trimpath -ldflags '-s -w' -o ../$@ .

clean:
	rm -rf bin .run
