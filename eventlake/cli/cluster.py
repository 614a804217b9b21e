"""`eventlake cluster ...`: a Spark standalone cluster on this machine."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from eventlake.cluster import ClusterStatus, SparkStandaloneCluster
from eventlake.cluster.standalone import DEFAULT_PORT, DEFAULT_UI_PORT, UI_PORT_CONF

cluster_app = typer.Typer(
    help="Run a Spark standalone cluster (a master and workers) on 127.0.0.1.",
    no_args_is_help=True,
)

WorkersOpt = Annotated[int, typer.Option("--workers", "-w", min=1, help="Workers.")]
CoresOpt = Annotated[int, typer.Option("--cores", "-c", min=1, help="Cores per worker.")]
MemoryOpt = Annotated[
    str, typer.Option("--memory", help="Memory for executors per worker (Spark's 1g, 512m).")
]
PortOpt = Annotated[int, typer.Option("--port", "-p", help="The master's port.")]
UiPortOpt = Annotated[int, typer.Option("--ui-port", help="The master's web UI port.")]
DataDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--data-dir", help="Logs and work folders (default: .eventlake/spark-cluster-<port>)."
    ),
]


def _cluster(workers: int, cores: int, memory: str, port: int, ui_port: int,
             data_dir: Path | None) -> SparkStandaloneCluster:  # fmt: skip
    return SparkStandaloneCluster(
        workers, cores, memory, port=port, ui_port=ui_port, data_dir=data_dir
    )


def _show(status: ClusterStatus, cluster: SparkStandaloneCluster) -> None:
    master = f"running (pid {status.master_pid})" if status.master_pid else "stopped"
    typer.echo(f"master {status.master_url}\t{master}\tweb UI {status.ui_url}")
    for w in status.workers:
        state = (
            f"{w.state} (pid {w.pid})"
            if w.pid and w.state
            else (f"not registered (pid {w.pid})" if w.pid else "stopped")
        )
        typer.echo(f"{w.name}\t{state}\t{w.cores} cores\t{w.memory_mb} MB\t"
                   f"{cluster.log_file(w.name)}")  # fmt: skip


@cluster_app.command()
def start(workers: WorkersOpt = 2, cores: CoresOpt = 1, memory: MemoryOpt = "1g",
          port: PortOpt = DEFAULT_PORT, ui_port: UiPortOpt = DEFAULT_UI_PORT,
          data_dir: DataDirOpt = None) -> None:  # fmt: skip
    """Start the master and workers in the background; returns once every worker is ALIVE."""
    cluster = _cluster(workers, cores, memory, port, ui_port, data_dir)
    status = cluster.start()
    _show(status, cluster)
    typer.echo(f"{status.cores} cores. Run a pipeline on it:")
    conf = "" if ui_port == DEFAULT_UI_PORT else f" --set spark.conf.{UI_PORT_CONF}={ui_port}"
    typer.echo(f"  eventlake --set spark.master={status.master_url}{conf} run PIPELINE")


@cluster_app.command()
def stop(workers: WorkersOpt = 2, cores: CoresOpt = 1, memory: MemoryOpt = "1g",
         port: PortOpt = DEFAULT_PORT, ui_port: UiPortOpt = DEFAULT_UI_PORT,
         data_dir: DataDirOpt = None) -> None:  # fmt: skip
    """Stop the workers (and their executors) and the master; safe when not running."""
    cluster = _cluster(workers, cores, memory, port, ui_port, data_dir)
    verb = "stopped" if cluster.stop() else "was not running"
    typer.echo(f"Spark cluster {cluster.master_url} {verb}")


@cluster_app.command()
def status(workers: WorkersOpt = 2, cores: CoresOpt = 1, memory: MemoryOpt = "1g",
           port: PortOpt = DEFAULT_PORT, ui_port: UiPortOpt = DEFAULT_UI_PORT,
           data_dir: DataDirOpt = None) -> None:  # fmt: skip
    """Print the master and each worker (exit 3 unless all run and are ALIVE)."""
    cluster = _cluster(workers, cores, memory, port, ui_port, data_dir)
    current = cluster.status()
    _show(current, cluster)
    if not current.running:
        raise typer.Exit(3)
