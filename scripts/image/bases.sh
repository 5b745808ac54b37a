#!/usr/bin/env bash
# Builds the two base images the local image build uses, from Debian
# packages at the versions pinned in pins.sh, and tags them locally (no image
# registry is needed):
#   $RUNTIME_BASE  a distroless-like root filesystem: glibc, CA certificates,
#                  tzdata, netbase, os-release, the nonroot user 65532; no shell
#   $BUILD_BASE    the same plus make, bash and busybox, for the build stage
# The .debs are unpacked (dpkg-deb -x), not installed: no maintainer script
# runs, so what a postinst would make (the CA bundle, /etc/os-release, the
# merged /usr) is made here. Skipped when both images exist with the hash of
# this script and the base pins.
set -euo pipefail
# Root: the files' owners (65532 for /home/nonroot) and rootful podman.
if [ "$(id -u)" -ne 0 ]; then
  exec sudo --preserve-env=CONTAINERS_CONF,RUNTIME_BASE,BUILD_BASE,PODMAN bash "$0" "$@"
fi
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=pins.sh
. "$here/pins.sh"
RUNTIME_BASE="${RUNTIME_BASE:-localhost/otelcol-gpubuild-base/runtime:debian12-nonroot}"
BUILD_BASE="${BUILD_BASE:-localhost/otelcol-gpubuild-base/build:debian12}"
PODMAN="${PODMAN:-podman}"
hash="$( (printf '%s\n' "${RUNTIME_PINS[@]}" "${BUILD_PINS[@]}"; cat "$here/bases.sh") | sha256sum | cut -c1-16)"
label=org.gpubuild.base-hash

current() { [ "$($PODMAN image inspect --format "{{index .Labels \"$label\"}}" "$1" 2>/dev/null)" = "$hash" ]; }
if current "$RUNTIME_BASE" && current "$BUILD_BASE"; then
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/debs"
download() {
  (cd "$work/debs" && apt-get download -q "$@" >/dev/null 2>&1) && return 0
  # The package lists may predate a pin: refresh them once.
  apt-get update >/dev/null
  (cd "$work/debs" && apt-get download -q "$@" >/dev/null) || {
    echo "error: a pinned base package is not available: $* (update scripts/image/pins.sh)" >&2
    exit 1
  }
}
download "${RUNTIME_PINS[@]}" "${BUILD_PINS[@]}"

# assemble DIR PIN...: unpack the packages into DIR and do what their
# maintainer scripts and a distroless image would.
assemble() {
  local root="$1"; shift
  mkdir -p "$root"
  mkdir -p "$root/var/lib/dpkg/status.d"
  for pin in "$@"; do
    dpkg-deb -x "$work/debs/${pin%%=*}_"*.deb "$root"
    # What is installed, one control file per package, where distroless
    # keeps it: SBOM tools and scanners read it (scripts/image/sbom.sh).
    dpkg-deb -f "$work/debs/${pin%%=*}_"*.deb > "$root/var/lib/dpkg/status.d/${pin%%=*}"
  done
  (
    cd "$root"
    # Merged /usr, as debootstrap makes Debian 12: /bin, /sbin, /lib, /lib64 link into /usr.
    for d in bin sbin lib lib64; do
      mkdir -p "usr/$d"
      if [ -d "$d" ] && [ ! -L "$d" ]; then
        cp -a "$d/." "usr/$d/" && rm -rf "$d"
      fi
      ln -s "usr/$d" "$d"
    done
    ln -sf ../usr/lib/os-release etc/os-release
    # What ca-certificates' postinst makes: one bundle of every certificate it ships.
    mkdir -p etc/ssl/certs
    find usr/share/ca-certificates -name '*.crt' -print0 | sort -z |
      xargs -0 -n1 sh -c 'cat "$0"; [ -z "$(tail -c1 "$0")" ] || echo' > etc/ssl/certs/ca-certificates.crt
    rm -rf usr/share/ca-certificates usr/sbin/update-ca-certificates etc/ca-certificates
    # Documentation other than the licenses, and what only dpkg or a login shell reads.
    find usr/share/doc -mindepth 2 ! -name copyright ! -type d -delete
    find usr/share/doc -mindepth 1 -type d -empty -delete
    rm -rf usr/share/man usr/share/info usr/share/lintian usr/share/base-files usr/share/common-licenses \
      usr/share/dict usr/share/bug usr/share/menu etc/profile.d etc/skel etc/update-motd.d etc/default etc/dpkg
    printf '%s\n' 'root:x:0:0:root:/root:/sbin/nologin' \
      'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin' \
      'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' > etc/passwd
    printf '%s\n' 'root:x:0:' 'nobody:x:65534:' 'nonroot:x:65532:' > etc/group
    echo 'hosts: files dns' > etc/nsswitch.conf
    mkdir -p home/nonroot tmp root
    chown 65532:65532 home/nonroot && chmod 0700 home/nonroot
    chmod 1777 tmp && chmod 0700 root
  )
}

import() { # DIR IMAGE USER WORKDIR
  local old
  old="$($PODMAN image inspect --format '{{.Id}}' "$2" 2>/dev/null || true)"
  tar --numeric-owner --sort=name -C "$1" -cf "$work/rootfs.tar" .
  $PODMAN import --quiet \
    --change "USER $3" \
    --change "WORKDIR $4" \
    --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    --change "ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt" \
    --change "LABEL $label=$hash" \
    "$work/rootfs.tar" "$2" >/dev/null
  # The previous build of this base, now untagged.
  [ -z "$old" ] || $PODMAN rmi "$old" >/dev/null 2>&1 || true
  echo "built $2 from Debian packages" >&2
}

assemble "$work/runtime" "${RUNTIME_PINS[@]}"
# iconv's modules (8 MB): neither the Go binaries nor libnvidia-ml use iconv.
rm -rf "$work/runtime/usr/lib/x86_64-linux-gnu/gconv"
import "$work/runtime" "$RUNTIME_BASE" 65532:65532 /home/nonroot

assemble "$work/build" "${RUNTIME_PINS[@]}" "${BUILD_PINS[@]}"
for cmd in $("$work/build/usr/bin/busybox" --list); do
  [ -e "$work/build/usr/bin/$cmd" ] || [ -e "$work/build/usr/sbin/$cmd" ] || ln -s busybox "$work/build/usr/bin/$cmd"
done
import "$work/build" "$BUILD_BASE" 0:0 /
