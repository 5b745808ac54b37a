#!/usr/bin/env bash
# Prints a software bill of materials of IMAGE, read from the image itself:
# the Debian packages its base records in /var/lib/dpkg/status.d (as
# distroless does) and, from `go version -m`, the Go toolchain, build
# settings and every module (with its go.sum hash) compiled into each binary.
# Usage: sbom.sh IMAGE
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
  exec sudo --preserve-env=CONTAINERS_CONF,PODMAN,PATH bash "$0" "$@"
fi
image="${1:?usage: sbom.sh IMAGE}"
PODMAN="${PODMAN:-podman}"
work="$(mktemp -d)"
name="sbom-$$"
trap '$PODMAN rm --force --volumes "$name" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
$PODMAN create --name "$name" "$image" >/dev/null
$PODMAN cp "$name:/var/lib/dpkg/status.d" "$work/status.d"
for bin in otelcol-gpubuild healthprobe; do
  $PODMAN cp "$name:/usr/local/bin/$bin" "$work/$bin"
done
echo "# SBOM of $image ($($PODMAN image inspect --format '{{.Id}}' "$image" | cut -c1-12))"
echo
echo "## Debian packages (/var/lib/dpkg/status.d)"
for f in "$work"/status.d/*; do
  awk -F': ' '/^Package:/{p=$2} /^Version:/{v=$2} /^Architecture:/{a=$2} END{print p, v, a}' "$f"
done | sort
for bin in otelcol-gpubuild healthprobe; do
  echo
  echo "## /usr/local/bin/$bin (go version -m)"
  go version -m "$work/$bin" | sed "s|$work/||"
done
