#!/usr/bin/env bash
# Draws docs/images/dashboards.png: the main panels of the Grafana dashboard
# (deploy/grafana/gpubuild-dashboard.json), the GPU cost per build among
# them, over a real two-minute run of the built sidecar (fake two-GPU
# driver, simulated build service with failures, timeouts, 4xx and 5xx) scraped by Debian's Prometheus. Grafana itself is not
# in Debian's packages: the panels' own queries are evaluated by Prometheus
# (test/dashboards TestWritePictureData) and plotted with Debian's matplotlib.
#
#   scripts/dashboard-picture.sh        (about 3 minutes)
set -euo pipefail
cd "$(dirname "$0")/.."

MATPLOTLIB_DEB=3.6.3-1+b1
if ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update
  $sudo apt-get install -y --no-install-recommends "python3-matplotlib=${MATPLOTLIB_DEB}"
fi
make build deps

data="$(mktemp)"
trap 'rm -f "$data"' EXIT
DASHBOARD_PICTURE_DATA="$data" go test -count=1 -timeout 10m -run '^TestWritePictureData$' ./test/dashboards/
mkdir -p docs/images
/usr/bin/python3 scripts/dashboard-picture.py "$data" docs/images/dashboards.png
echo "wrote docs/images/dashboards.png"
