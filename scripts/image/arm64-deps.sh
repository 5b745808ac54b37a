#!/usr/bin/env bash
# Installs what build-arm64 and test/arm64 need: Debian's aarch64 cross
# compiler and C library (cgo for go-nvml) and qemu-user-static (runs the
# arm64 binary on an amd64 machine), at the versions pinned in pins.sh.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=pins.sh
. "$here/pins.sh"
missing=()
for pin in "${ARM64_PINS[@]}"; do
  name="${pin%%=*}" want="${pin#*=}"
  have="$(dpkg-query -W -f '${Status} ${Version}' "$name" 2>/dev/null || true)"
  [ "$have" = "install ok installed $want" ] || missing+=("$pin")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
echo "installing ${missing[*]}" >&2
$sudo apt-get update
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
