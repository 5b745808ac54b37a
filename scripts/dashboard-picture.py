#!/usr/bin/python3
"""Plots the main panels of deploy/grafana/gpubuild-dashboard.json from the
data test/dashboards' TestWritePictureData wrote (a real run of the sidecar
and Prometheus), as docs/images/dashboards.png. Run by
scripts/dashboard-picture.sh; needs Debian's python3-matplotlib."""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# The panels an on-call engineer looks at first, in reading order.
MAIN = [
    "Build success rate (15 min)",
    "Builds ended by result",
    "Build duration (successful builds)",
    "Builds in flight and timed out",
    "API requests by route and status class",
    "API 5xx rate",
    "GPU utilization",
    "GPU temperature",
    "GPU power",
    "GPU energy per successful build",
    "GPU busy time per successful build",
    "Peak GPU memory per successful build",
    "SM and tensor activity per successful build",
    "GPU energy per stage",
    "GPU SM and tensor activity (GPM)",
]

UNITS = {"joule": "J", "bytes": "bytes", "percentunit": "fraction", "s": "seconds", "reqps": "requests/s", "celsius": "°C", "watt": "W", "short": ""}


def main(data_path, png_path):
    with open(data_path) as f:
        panels = {p["title"]: p for p in json.load(f)}
    missing = [t for t in MAIN if t not in panels]
    if missing:
        sys.exit(f"panels not in {data_path}: {missing}")
    fig, axes = plt.subplots(5, 3, figsize=(15, 17.5))
    for ax, title in zip(axes.flat, MAIN):
        panel = panels[title]
        series = panel.get("series") or []
        if not series:
            sys.exit(f"panel {title!r} has no data")
        for s in series:
            pts = s.get("points") or []
            ax.plot([p[0] for p in pts], [p[1] for p in pts], label=s["legend"], linewidth=1.4)
        ax.set_title(title, fontsize=11)
        ax.set_xlabel("seconds into the run", fontsize=8)
        ax.set_ylabel(UNITS.get(panel["unit"], panel["unit"]), fontsize=8)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
        if title.startswith("GPU") or title in MAIN[9:]:
            # The fake driver's readings are steady: show them against zero.
            ax.set_ylim(bottom=0, top=max(1.0, ax.get_ylim()[1] * 1.15))
        ax.legend(fontsize=6, loc="best")
    for ax in axes.flat[len(MAIN):]:
        ax.set_visible(False)
    fig.suptitle("otelcol-gpubuild: Grafana dashboard panels over a real run (scripts/dashboard-picture.sh)", fontsize=12)
    fig.tight_layout(rect=(0, 0, 1, 0.98))
    fig.savefig(png_path, dpi=80)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
