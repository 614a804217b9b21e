"""The soak's figures, one PNG each, from bench/results/soak.json (run in the bench venv,
which has matplotlib): ``python -m bench.plot_soak SOAK_JSON OUT_DIR``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

MIB = 2**20


def _minutes(phase: dict[str, Any]) -> list[int]:
    return [s["minute"] for s in phase["samples"]]


def _per_phase(phases: dict[str, Any], title: str, ylabel: str, out: Path,
               series: Any) -> None:  # fmt: skip
    """One panel per phase; ``series(phase)`` -> {label: (minutes, values)}."""
    fig, axes = plt.subplots(1, len(phases), figsize=(7 * len(phases), 4.5), sharey=True,
                             squeeze=False)  # fmt: skip
    for ax, (name, phase) in zip(axes[0], phases.items(), strict=True):
        ax.set_prop_cycle(color=plt.get_cmap("tab20").colors)
        for label, (xs, ys) in series(phase).items():
            # matplotlib leaves out labels that start with "_" (_eventlake/expectations)
            ax.plot(xs, ys, label=label.lstrip("_"), linewidth=1.2)
        ax.set_title(f"{title}: maintenance {name}")
        ax.set_xlabel("minute")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel(ylabel)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)


def _both(phases: dict[str, Any], title: str, ylabel: str, out: Path,
          keys: dict[str, str]) -> None:  # fmt: skip
    """Phases on one panel: a line per (measure, phase)."""
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for name, phase in phases.items():
        for key, label in keys.items():
            if not all(key in s for s in phase["samples"]):  # sampled since 2026-11-27
                continue
            ys = [s[key] / MIB for s in phase["samples"]]
            ax.plot(_minutes(phase), ys, label=f"{label}, maintenance {name}",
                    linestyle="-" if name == "on" else "--")  # fmt: skip
    ax.set_title(title)
    ax.set_xlabel("minute")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)


def main() -> None:
    results = json.loads(Path(sys.argv[1]).read_text())
    out = Path(sys.argv[2])
    phases = {n: p for n, p in results["phases"].items() if "samples" in p}
    if not phases:
        return

    def batch_p99(phase: dict[str, Any]) -> dict[str, Any]:
        flows = sorted({f for s in phase["samples"] for f in s["batches"]})
        return {f: ([s["minute"] for s in phase["samples"] if f in s["batches"]],
                    [s["batches"][f]["p99"] for s in phase["samples"] if f in s["batches"]])
                for f in flows}  # fmt: skip

    def files(phase: dict[str, Any]) -> dict[str, Any]:
        tables = sorted({t for s in phase["samples"] for t in s["tables"]})
        return {t: ([s["minute"] for s in phase["samples"] if t in s["tables"]],
                    [s["tables"][t]["files"] for s in phase["samples"] if t in s["tables"]])
                for t in tables}  # fmt: skip

    def latency(phase: dict[str, Any]) -> dict[str, Any]:
        return {hop: ([int(m) for m in per], [v.get("p99") for v in per.values()])
                for hop, per in phase["latency"].items()}  # fmt: skip

    _per_phase(phases, "batch time p99 per flow", "seconds", out / "soak-batch-p99.png",
               batch_p99)  # fmt: skip
    _per_phase(phases, "files read by each table's current version", "files",
               out / "soak-files.png", files)  # fmt: skip
    _per_phase(phases, "p99 latency (silver: produce -> visible; gold: closed hour -> "
               "written)", "seconds", out / "soak-latency.png", latency)  # fmt: skip
    _both(phases, "driver memory", "MiB", out / "soak-memory.png",
          {"driver_rss_bytes": "Python RSS", "jvm_rss_bytes": "JVM RSS",
           "jvm_heap_used_bytes": "JVM heap used",
           "jvm_rss_trimmed_less_heap_bytes": "JVM RSS outside the heap, trimmed"})  # fmt: skip
    _both(phases, "native memory: the JVM's outside NMT, RocksDB's, the driver's C heap", "MiB",
          out / "soak-native.png",
          {"jvm_untracked_bytes": "JVM RSS less NMT committed",
           "rocksdb_cache_bytes": "RocksDB block cache (memtables charged to it)",
           "jvm_untracked_less_rocksdb_bytes": "the same less RocksDB",
           "jvm_untracked_trimmed_less_rocksdb_bytes": "the same, glibc's free given back",
           "driver_malloc_used_bytes": "driver C heap in use",
           "driver_malloc_free_bytes": "driver C heap free (glibc's count)"})  # fmt: skip
    _both(
        phases,
        "checkpoints and state",
        "MiB",
        out / "soak-checkpoints.png",
        {"checkpoint_bytes": "checkpoints", "state_bytes": "state stores"},
    )


if __name__ == "__main__":
    main()
