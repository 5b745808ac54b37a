# syntax=docker/dockerfile:1
# The bases are the public images unless the build says otherwise: `make
# image` builds where no registry is reachable, with bases made from Debian
# packages (scripts/image/bases.sh) and bin/ from the host's `make build` in
# the context (scripts/image/build.sh).
ARG BUILD_IMAGE=golang:1.26.8-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/base-debian12:nonroot

# Build stage: the same `make build` that CI runs (ocb and mdatagen come from
# the pinned tools module; cgo is on for NVML). When the context holds bin/
# newer than every source (make image), make finds it up to date.
FROM ${BUILD_IMAGE} AS build
WORKDIR /src
COPY . .
RUN make build \
 && mkdir -p /out/queue

# Runtime: glibc-based (go-nvml dlopens libnvidia-ml.so.1, which the NVIDIA
# container toolkit injects), no shell, non-root (uid 65532).
FROM ${RUNTIME_IMAGE}
COPY --from=build /src/bin/otelcol-gpubuild /src/bin/healthprobe /usr/local/bin/
COPY --from=build /src/otelcol-config.yaml /etc/otelcol-gpubuild/config.yaml
# Fleet: the gateway's config (a fleet sidecar is config.yaml with
# GPUBUILD_DESTINATIONS=gateway; docs/fleet.md).
COPY --from=build /src/otelcol-gateway.yaml /etc/otelcol-gpubuild/gateway.yaml
COPY --from=build --chown=65532:65532 /out/queue /var/lib/otelcol-gpubuild/queue
ENV NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=utility \
    GPUBUILD_QUEUE_DIR=/var/lib/otelcol-gpubuild/queue
USER 65532:65532
VOLUME ["/var/lib/otelcol-gpubuild/queue"]
# OTLP gRPC, OTLP HTTP, health_check. All bind to 127.0.0.1 unless
# GPUBUILD_LISTEN_HOST / GPUBUILD_HEALTH_HOST say otherwise: a sidecar shares
# the service's network namespace, so localhost is enough.
EXPOSE 4317 4318 13133
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 CMD ["/usr/local/bin/healthprobe"]
ENTRYPOINT ["/usr/local/bin/otelcol-gpubuild"]
CMD ["--config", "/etc/otelcol-gpubuild/config.yaml"]
