"""`eventlake jars fetch | path`: the locked JVM jars, downloaded ahead of use or listed;
``fetch`` also builds the driver JVM's class-data archive for them."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TaskID, TextColumn

from eventlake.cli.state import CliState
from eventlake.errors import EventlakeError
from eventlake.jars import (
    BROKER_JARS,
    SPARK_JARS,
    LockedJar,
    cache_dir,
    fetch,
    jar_files,
    locked_sets,
    missing,
    repository_url,
)
from eventlake.jvm_code import own_jar, spark_jars
from eventlake.secrets import mask_text
from eventlake.warmup import build_class_archive

jars_app = typer.Typer(
    help="The JVM jars Spark and the broker load: locked, downloaded once, verified.",
    no_args_is_help=True,
)
SetsOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="A jar set of the lock (repeatable; default: spark, kafka-broker)."),
]


@jars_app.command("fetch")
def fetch_jars(
    ctx: typer.Context,
    sets: SetsOpt = None,
    class_archive: Annotated[
        bool,
        typer.Option(
            "--class-archive/--no-class-archive",
            help="With the spark set: build the driver JVM's class-data archive.",
        ),
    ] = True,
) -> None:
    """Download the sets' jars the cache lacks from the Maven repository, each checked
    against eventlake's lock (for an offline image: with EVENTLAKE_JARS_DIR set). With the
    spark set, record the driver JVM's class-data archive once (a run's JVM then starts,
    and meets Delta and Kafka, seconds sooner)."""
    state: CliState = ctx.obj
    kinds = sets or [SPARK_JARS, BROKER_JARS]
    repository = state.settings().jars.repository
    needed = missing(kinds)
    console = Console(stderr=True)
    if needed:
        total = sum(j.size for j in needed)
        where = mask_text(repository_url(repository))
        with Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                      console=console, transient=not console.is_terminal) as bar:  # fmt: skip
            task: TaskID = bar.add_task(f"{len(needed)} jars from {where}", total=total)
            done: dict[str, int] = {}

            def advance(jar: LockedJar, received: int, _size: int) -> None:
                done[jar.relative_path] = received
                bar.update(task, completed=sum(done.values()))

            fetch(kinds, repository=repository, progress=advance)
    count = sum(len(locked_sets()[k]) for k in kinds)
    typer.echo(f"{', '.join(kinds)}: {count} jars in {cache_dir()} "
               f"({len(needed)} downloaded, {count - len(needed)} already there)")  # fmt: skip
    if SPARK_JARS in kinds:
        typer.echo(f"eventlake's own classes: {own_jar()}")
        if class_archive:
            _class_archive(state, console)


def _class_archive(state: CliState, console: Console) -> None:
    """Build the class-data archive unless it is there; a failure is a warning: runs start
    without it."""
    try:
        with console.status("recording the JVM class-data archive (a training run)..."):
            build = build_class_archive(state.settings())
    except EventlakeError as exc:
        console.print(f"[yellow]warning[/]: {exc}")
        return
    if build is None:
        typer.echo("class archive: none (no java found)")
        return
    did = f"built in {build.seconds:.0f} s" if build.built else "already there"
    typer.echo(f"class archive: {build.path} ({build.size / 1e6:.0f} MB, {did})")


@jars_app.command("path")
def jars_path(
    ctx: typer.Context,
    sets: SetsOpt = None,
    separator: Annotated[str, typer.Option("--separator", help="Between paths.")] = ",",
) -> None:
    """Print the sets' jar files (downloaded first if missing), for spark-submit --jars."""
    state: CliState = ctx.obj
    repository = state.settings().jars.repository
    kinds = sets or [SPARK_JARS]
    paths = [
        str(p)
        for kind in kinds
        for p in (
            spark_jars(repository=repository)
            if kind == SPARK_JARS
            else jar_files(kind, repository=repository)
        )
    ]
    typer.echo(separator.join(dict.fromkeys(paths)))
