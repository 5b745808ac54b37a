#!/usr/bin/env bash
# Builds the image of the JavaScript SDK build service (test/jsservice, the
# service test/compose runs beside the sidecar with deploy/docker-compose.yaml):
# Debian's Node.js, unpacked from the .debs pinned in pins.sh (no maintainer
# script runs; merged /usr as in the runtime base), on the runtime base of
# bases.sh, with the service and its node_modules (make jsservice-deps).
# Skipped when the image exists with the hash of its inputs.
# Usage: jsservice.sh IMAGE
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
  exec sudo --preserve-env=CONTAINERS_CONF,RUNTIME_BASE,BUILD_BASE,PODMAN bash "$0" "$@"
fi
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=pins.sh
. "$here/pins.sh"
image="${1:?usage: jsservice.sh IMAGE}"
PODMAN="${PODMAN:-podman}"
export RUNTIME_BASE="${RUNTIME_BASE:-localhost/otelcol-gpubuild-base/runtime:debian12-nonroot}"
[ -d "$root/test/jsservice/node_modules/@opentelemetry/sdk-node" ] ||
  { echo "error: test/jsservice/node_modules missing: run make jsservice-deps" >&2; exit 1; }
bash "$here/bases.sh"

label=org.gpubuild.jsservice-hash
hash="$( (printf '%s\n' "${JSSERVICE_PINS[@]}"; $PODMAN image inspect --format '{{.Id}}' "$RUNTIME_BASE"
  cat "$0" "$here/jsservice.Containerfile" "$root/test/jsservice/service.js" "$root/test/jsservice/package.json" \
    "$root/test/jsservice/package-lock.json") | sha256sum | cut -c1-16)"
if [ "$($PODMAN image inspect --format "{{index .Labels \"$label\"}}" "$image" 2>/dev/null)" = "$hash" ]; then
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/debs" "$work/rootfs" "$work/app"
(cd "$work/debs" && apt-get download -q "${JSSERVICE_PINS[@]}" >/dev/null 2>&1) || {
  apt-get update >/dev/null
  (cd "$work/debs" && apt-get download -q "${JSSERVICE_PINS[@]}" >/dev/null) || {
    echo "error: a pinned package is not available: ${JSSERVICE_PINS[*]} (update scripts/image/pins.sh)" >&2
    exit 1
  }
}
for deb in "$work"/debs/*.deb; do dpkg-deb -x "$deb" "$work/rootfs"; done
(
  cd "$work/rootfs"
  # The base's /lib is a link into /usr/lib: the packages' /lib goes there.
  for d in bin sbin lib lib64; do
    if [ -d "$d" ]; then mkdir -p "usr/$d" && cp -a "$d/." "usr/$d/" && rm -rf "$d"; fi
  done
  rm -rf usr/share/doc usr/share/man usr/share/lintian usr/share/gdb usr/share/systemtap usr/share/bash-completion
)
cp -a "$root/test/jsservice/service.js" "$root/test/jsservice/package.json" "$root/test/jsservice/node_modules" "$work/app/"

old="$($PODMAN image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)"
$PODMAN build --quiet --format docker --pull=never \
  --build-arg RUNTIME_IMAGE="$RUNTIME_BASE" --label "$label=$hash" \
  --tag "$image" --file "$here/jsservice.Containerfile" "$work" >/dev/null
new="$($PODMAN image inspect --format '{{.Id}}' "$image")"
if [ -n "$old" ] && [ "$old" != "$new" ]; then
  $PODMAN rmi "$old" >/dev/null 2>&1 || true
fi
echo "built $image ($($PODMAN image inspect --format '{{.Size}}' "$image") bytes)"
