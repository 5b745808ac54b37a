#!/usr/bin/env bash
# Builds the sidecar image from the project's Dockerfile with podman where no
# image registry is reachable: the bases come from Debian packages
# (bases.sh), and the build stage's `make build` finds the binaries the
# host's `make build` left in bin/ up to date (the build base has no Go, so a
# stale bin/ fails the build rather than ship). --format docker keeps the
# HEALTHCHECK, which the OCI format has no field for.
# Usage: build.sh IMAGE
set -euo pipefail
# Rootful podman (the engine settings of containers.conf are checked as root).
if [ "$(id -u)" -ne 0 ]; then
  exec sudo --preserve-env=CONTAINERS_CONF,RUNTIME_BASE,BUILD_BASE,PODMAN bash "$0" "$@"
fi
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
image="${1:?usage: build.sh IMAGE}"
PODMAN="${PODMAN:-podman}"
export RUNTIME_BASE="${RUNTIME_BASE:-localhost/otelcol-gpubuild-base/runtime:debian12-nonroot}"
export BUILD_BASE="${BUILD_BASE:-localhost/otelcol-gpubuild-base/build:debian12}"
for f in bin/otelcol-gpubuild bin/healthprobe; do
  [ -x "$root/$f" ] || { echo "error: $f missing: run make build first (make image does)" >&2; exit 1; }
done
bash "$here/bases.sh"
old="$($PODMAN image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)"
$PODMAN build --quiet --format docker --pull=never \
  --ignorefile "$here/local.dockerignore" \
  --build-arg BUILD_IMAGE="$BUILD_BASE" \
  --build-arg RUNTIME_IMAGE="$RUNTIME_BASE" \
  --tag "$image" --file "$root/Dockerfile" "$root" >/dev/null
new="$($PODMAN image inspect --format '{{.Id}}' "$image")"
if [ -n "$old" ] && [ "$old" != "$new" ]; then
  $PODMAN rmi "$old" >/dev/null 2>&1 || true
fi
echo "built $image ($($PODMAN image inspect --format '{{.Size}}' "$image") bytes)"
