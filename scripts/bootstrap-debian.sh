#!/usr/bin/env bash
# Installs what `make run` and `make test` need beyond Go and gcc on a fresh
# Debian 12 machine: make and git, pinned to the versions CI uses. Everything
# else (ocb, mdatagen) the Makefile builds from the pinned tools module.
set -euo pipefail
declare -A pins=([make]=4.3-4.1 [git]=1:2.39.5-0+deb12u3)
missing=()
for pkg in "${!pins[@]}"; do
  command -v "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && { echo "make and git are present"; exit 0; }
sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
$sudo apt-get update
for pkg in "${missing[@]}"; do
  if ! $sudo apt-get install -y --no-install-recommends "$pkg=${pins[$pkg]}"; then
    echo "warning: $pkg=${pins[$pkg]} is not in this Debian release; installing its own version" >&2
    $sudo apt-get install -y --no-install-recommends "$pkg"
  fi
done
