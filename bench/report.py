"""Results: one ``Row`` per comparison, shown as a rich table, saved as JSON, plotted.

A row holds both figures exactly as measured; the ratio is always offsetlog / baseline, and
the target says which way is good (``>=`` for throughput, ``<=`` for latency and memory).
"""

from __future__ import annotations

import json
import os
import platform
import sys
from dataclasses import asdict, dataclass, field

HIGHER, LOWER = "higher", "lower"  # which way is better for a row's figures


@dataclass
class Row:
    case: str
    baseline: str
    offsetlog: float | None
    baseline_value: float | None
    unit: str  # "us", "commits/s", "records/s", "bytes", or free text
    better: str = HIGHER
    target: float | None = None  # the ratio the project's issue asks for; None = information
    note: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        if self.offsetlog is None or not self.baseline_value:
            return None
        return self.offsetlog / self.baseline_value

    @property
    def met(self) -> bool | None:
        r = self.ratio
        if self.target is None or r is None:
            return None
        return r >= self.target if self.better == HIGHER else r <= self.target

    def as_dict(self) -> dict:
        d = asdict(self)
        d["ratio"] = self.ratio
        d["met"] = self.met
        return d


def fmt_value(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "us":
        return f"{value:,.1f} µs"
    if unit == "bytes":
        return f"{value / 2**20:,.1f} MiB"
    if unit.endswith("/s"):
        return f"{value:,.0f} {unit}"
    if unit == "s":
        return f"{value:,.4g} s"
    return f"{value:,.4g} {unit}".strip()


def fmt_target(row: Row) -> str:
    if row.target is None:
        return "-"
    return f"{'≥' if row.better == HIGHER else '≤'} {row.target:g}×"


def fmt_met(row: Row) -> str:
    met = row.met
    return "n/a" if met is None else ("yes" if met else "NO")


def fmt_ratio(row: Row) -> str:
    r = row.ratio
    if r is None:
        return "-"
    # more digits where three would round across the target (1.1003 must not read 1.100)
    near = row.target is not None and abs(r - row.target) < 0.0005
    return f"{r:.5f}×" if near else f"{r:.3f}×"


COLUMNS = ("case", "baseline", "offsetlog", "baseline figure", "ratio", "target", "met")


def cells(row: Row) -> tuple[str, ...]:
    return (row.case, row.baseline, fmt_value(row.offsetlog, row.unit),
            fmt_value(row.baseline_value, row.unit), fmt_ratio(row), fmt_target(row),
            fmt_met(row))


def print_table(rows: list[Row], console, title: str) -> None:
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    for col in COLUMNS:
        table.add_column(col, justify="right" if col in ("offsetlog", "baseline figure",
                                                          "ratio") else "left",
                         overflow="fold")
    for row in rows:
        style = None if row.met is None else ("green" if row.met else "bold red")
        c = cells(row)
        table.add_row(*c[:-1], c[-1], style=style)
    console.print(table)
    notes = [(r.case, r.note) for r in rows if r.note]
    for case, note in notes:
        console.print(f"[dim]{case}: {note}[/dim]")


def markdown_table(rows: list[Row]) -> str:
    out = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells(row)) + " |")
    return "\n".join(out) + "\n"


def machine_info(data_dir: str) -> dict:
    info = {"platform": platform.platform(), "python": sys.version.split()[0],
            "cpus": os.cpu_count(), "data_dir": os.path.abspath(data_dir)}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            info["mem_total_kb"] = int(f.readline().split()[1])
        # the mount that holds the data directory: the longest mount point that prefixes it
        best = ("", "?", "?")
        with open("/proc/mounts") as f:
            for line in f:
                dev, mnt, fstype = line.split()[:3]
                if info["data_dir"].startswith(mnt) and len(mnt) > len(best[0]):
                    best = (mnt, dev, fstype)
        info["filesystem"] = f"{best[2]} on {best[1]} (mounted at {best[0]})"
    except OSError:
        pass
    return info


def engine_version(source_root: str) -> dict:
    """The commit the engine was measured at, and whether its files differed from it."""
    import subprocess

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", "-C", source_root, *args], capture_output=True,
                                  text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    # tracked engine files changed since the commit (new, untracked modules are not measured)
    dirty = git("diff", "--name-only", "HEAD", "--", "offsetlog", "recovery", "compaction")
    return {"commit": git("rev-parse", "--short", "HEAD") or "?",
            "engine_modified": dirty.splitlines()}


def write_json(path: str, payload: dict) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(payload, f, indent=2, default=str)
        f.write("\n")
    os.replace(tmp, path)


def plot_threads(series: dict, path: str, title: str) -> None:
    """Throughput (commits/s) against threads, one line per series, log-scale x."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    threads = series["threads"]
    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=120)
    for name, values in series["commits_per_s"].items():
        xs = [t for t, v in zip(threads, values) if v is not None]
        ys = [v for v in values if v is not None]
        ax.plot(xs, ys, marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xticks(threads)
    ax.set_xticklabels([str(t) for t in threads])
    ax.set_xlabel("threads")
    ax.set_ylabel("commits/s (fsync per acknowledged commit)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
