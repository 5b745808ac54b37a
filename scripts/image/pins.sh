# Debian 12 packages, pinned: what `make image` installs on the host
# (HOST_PINS), what the local base images are assembled from (RUNTIME_PINS,
# BUILD_PINS), what the arm64 build and its test need (ARM64_PINS) and the
# JavaScript build service's image (JSSERVICE_PINS).
# A pin that Debian's mirror no longer serves fails with its name: update it
# here (apt-cache policy NAME) and the contents in the README.
# shellcheck shell=bash
HOST_PINS=(
  podman=4.3.1+ds1-8+deb12u1+b3
  buildah=1.28.2+ds1-3+deb12u1+b3
  runc=1.1.5+ds1-1+deb12u1
  conmon=2.1.6+ds1-1
  containernetworking-plugins=1.1.1+ds1-3+b5
  golang-github-containers-common=0.50.1+ds1-4
  # test/compose: Compose over podman's Docker-compatible socket.
  docker-compose=1.29.2-3
)
# The runtime base stands in for gcr.io/distroless/base-debian12:nonroot:
# glibc, CA certificates, time zones, /etc/services, os-release, a nonroot
# user (65532). No shell, no package manager.
RUNTIME_PINS=(
  base-files=12.4+deb12u15
  libc6=2.36-9+deb12u14
  libgcc-s1=12.2.0-14+deb12u1
  gcc-12-base=12.2.0-14+deb12u1
  ca-certificates=20250419~deb12u2
  tzdata=2026f-0+deb12u1
  netbase=6.4
  media-types=10.0.0
)
# The build base adds make, bash and a static busybox (find, mkdir, cp) for
# the build stage's `RUN make build`, which finds the binaries `make build`
# made on the host up to date: it has no Go, so a stale binary fails there.
BUILD_PINS=(
  make=4.3-4.1
  bash=5.2.15-2+b13
  libtinfo6=6.4-4
  busybox-static=1:1.35.0-4+deb12u1+b1
)
# The arm64 build (make build-arm64) and its test under emulation (test/arm64).
ARM64_PINS=(
  gcc-aarch64-linux-gnu=4:12.2.0-3
  libc6-dev-arm64-cross=2.36-8cross1
  qemu-user-static=1:7.2+dfsg-7+deb12u18+b3
)
# The JavaScript SDK build service's image (jsservice.sh: test/jsservice on
# the runtime base, run by test/compose): Debian's Node.js and what it loads.
JSSERVICE_PINS=(
  nodejs=18.20.4+dfsg-1~deb12u3
  libnode108=18.20.4+dfsg-1~deb12u3
  libbrotli1=1.0.9-2+deb12u1
  libc-ares2=1.18.1-3
  libicu72=72.1-3+deb12u1
  libnghttp2-14=1.52.0-1+deb12u3
  libssl3=3.0.22-1~deb12u2
  libuv1=1.44.2-1+deb12u1
  zlib1g=1:1.2.13.dfsg-1
  libstdc++6=12.2.0-14+deb12u1
  node-acorn=8.8.1+ds+~cs25.17.7-2
  node-xtend=4.0.2-3
  node-cjs-module-lexer=1.2.2+dfsg-5
  node-undici=5.15.0+dfsg1+~cs20.10.9.3-1+deb12u4
  node-busboy=1.6.0+~cs2.6.0-2
)
