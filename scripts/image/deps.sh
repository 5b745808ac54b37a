#!/usr/bin/env bash
# Installs the container engine `make image` and the container tests use:
# Debian's podman, buildah, runc and docker-compose (test/compose) at the
# versions pinned in pins.sh. Needs root (or sudo): the tests run rootful podman.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=pins.sh
. "$here/pins.sh"
missing=()
for pin in "${HOST_PINS[@]}"; do
  name="${pin%%=*}" want="${pin#*=}"
  have="$(dpkg-query -W -f '${Status} ${Version}' "$name" 2>/dev/null || true)"
  [ "$have" = "install ok installed $want" ] || missing+=("$pin")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
echo "installing ${missing[*]}" >&2
$sudo apt-get update
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
