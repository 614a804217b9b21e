"""What lives for one run: the :class:`RunScope` that ``run_pipeline`` opens and closes.

Everything a run holds beyond its declarations lives here, never in a module: the channel
by which a ``foreachBatch`` function hands its exception to the runner, the per-batch memo
targets share, the resources outputs open when their query starts (connections,
producers) and the run's background services (the Delta log-checkpoint worker, the late
keeper, the monitor). Closing the scope closes them, newest first. A scope is created by
whoever plans a pipeline and is reachable from every flow's context (``ctx.run``), so a
restarted query finds the same services and a second run in the process shares nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)


class Service(Protocol):
    """A background service of a run: closed (and waited for) when the run ends."""

    def close(self) -> None: ...


S = TypeVar("S", bound=Service)


class BatchFailures:
    """The exception a ``foreachBatch`` function raised, by query name, until the runner
    takes it: Spark passes only its text to the JVM, so this keeps its type and causes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failures: dict[str, BaseException] = {}

    def record(self, query: str, exc: BaseException) -> None:
        with self._lock:
            self._failures[query] = exc

    def take(self, query: str) -> BaseException | None:
        """The exception the batch function of ``query`` last raised, once."""
        with self._lock:
            return self._failures.pop(query, None)


class BatchMemo:
    """A DataFrame computed once per micro-batch and shared by the batch's targets.

    Each slot (flow, name) holds the newest batch's frame, materialized as a local
    checkpoint: a snapshot. Spark re-caches a persisted frame whenever any query writes a
    table it reads, so a memo over a table another flow appends to would change between
    the batch's targets, and each append would wait for it. Asking for a newer batch
    releases the older frame, and closing the run releases all.
    """

    def __init__(self) -> None:
        # Re-entrant: one memo's build may ask for another (users: latest from changes).
        self._lock = threading.RLock()
        self._slots: dict[tuple[str, str], tuple[tuple[str, int], DataFrame]] = {}

    def get(
        self, flow: str, name: str, batch: tuple[str, int], build: Callable[[], DataFrame]
    ) -> DataFrame:
        """``build()`` materialized, once for batch ``batch`` (stream id, batch id)."""
        with self._lock:
            cached = self._slots.get((flow, name))
            if cached is not None and cached[0] == batch:
                return cached[1]
            if cached is not None:
                _release(cached[1])
            df = build().localCheckpoint(eager=True)
            self._slots[(flow, name)] = (batch, df)
            return df

    def close(self) -> None:
        with self._lock:
            slots, self._slots = self._slots, {}
        for _, df in slots.values():
            try:
                _release(df)
            except Exception as e:  # a stopped session has released it already
                log.debug("releasing a batch memo at the run's end: %s", e)


def _release(df: DataFrame) -> None:
    """Drop the blocks of a local checkpoint (its plan is the checkpointed RDD)."""
    df._jdf.logicalPlan().rdd().unpersist(False)


T = TypeVar("T")


class DueWork(Generic[T]):
    """Work by key for a background service: done one key at a time by ``work(key, item)``
    on a daemon thread of its own (started on first use), a key due again while it waits
    done once with its newest item, in the order keys came due. ``work`` may return the
    seconds to rest before the next key. :meth:`close` lets what is due finish (up to
    ``drain_seconds``, without the rests), then stops the thread."""

    def __init__(
        self, name: str, work: Callable[[str, T], float | None], drain_seconds: float
    ) -> None:
        self.name, self.work, self.drain_seconds = name, work, drain_seconds
        self._due: dict[str, T] = {}
        self._busy = False
        self._hurry = False
        self._closing = False
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def put(self, key: str, item: T) -> None:
        """``key`` is due with ``item`` (ignored once closing)."""
        with self._cond:
            if self._closing:
                return
            self._due[key] = item
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def drain(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for what is due; whether all is done."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._due and not self._busy, timeout)

    def close(self) -> None:
        with self._cond:
            self._hurry = True
            self._cond.notify_all()
        self.drain(self.drain_seconds)
        with self._cond:
            self._closing = True
            self._due.clear()
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(self.drain_seconds)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._due) or self._closing)
                if self._closing:
                    return
                key = next(iter(self._due))
                item = self._due.pop(key)
                self._busy = True
            rest: float | None = None
            try:
                rest = self.work(key, item)
            except Exception as e:  # a stopped session, a dropped table: next time
                log.warning("%s of %s failed: %s", self.name, key, e)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
                    if rest:
                        self._cond.wait_for(lambda: self._hurry or self._closing, rest)


#: The name prefix of the threads that create outputs (planning's and the run's).
CREATE_THREADS = "eventlake-create"
#: Outputs created at once (each creation mostly waits on its Delta commit).
CREATE_WORKERS = 4


class OutputCreation:
    """Outputs created on worker threads while their flows' queries start, by flow.

    Planning hands over the outputs no other flow reads (a cold JVM takes seconds over
    Delta's first table); the flow's batch function waits for its output before the first
    write (:meth:`wait`). A creation that failed raises in that batch, and the flow's next
    batch (after its restart) tries it again, on its own thread. :meth:`wait_all` at the
    run's end makes sure of the outputs of flows that wrote no batch.
    """

    def __init__(self, workers: int = CREATE_WORKERS) -> None:
        self._workers = workers
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._pending: dict[str, tuple[Callable[[], None], Future[None] | None]] = {}

    def submit(self, flow: str, create: Callable[[], None]) -> None:
        """Start ``create()`` for ``flow``'s output (the worker threads start on first use)."""
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._workers, CREATE_THREADS)
            self._pending[flow] = (create, self._pool.submit(create))

    def pending(self) -> list[str]:
        """The flows whose output is not yet known to exist (being created, or failed),
        in the order they were handed over."""
        with self._lock:
            return list(self._pending)

    def wait(self, flow: str) -> None:
        """Return once ``flow``'s output exists (at once when it was not handed over);
        raise what its creation raised."""
        with self._lock:
            entry = self._pending.get(flow)
        if entry is None:
            return
        create, future = entry
        try:
            future.result() if future is not None else create()
        except BaseException:
            with self._lock:
                self._pending[flow] = (create, None)
            raise
        with self._lock:
            self._pending.pop(flow, None)

    def wait_all(self) -> None:
        """Return once every output handed over exists; raise the first failure (in the
        order they were handed over)."""
        for flow in self.pending():
            self.wait(flow)

    def close(self) -> None:
        """Let every creation handed over finish (failures are left to :meth:`wait`)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)


class RunScope:
    """One run's services and resources; ``with RunScope() as run:`` closes them all."""

    def __init__(self) -> None:
        self.failures = BatchFailures()
        self.memo = BatchMemo()
        self._lock = threading.RLock()
        self._services: dict[type[Any], Service] = {}
        self._resources: dict[tuple[str, str], Service] = {}
        self._closed = False

    def service(self, kind: type[S], factory: Callable[[], S] | None = None) -> S:
        """The run's one ``kind`` service, created (``factory()``, else ``kind()``) on
        first use; closed with the run."""
        with self._lock:
            found = self._services.get(kind)
            if found is None:
                found = factory() if factory is not None else kind()
                self._services[kind] = found
            assert isinstance(found, kind)
            return found

    def find(self, kind: type[S]) -> S | None:
        """The run's ``kind`` service if one was created, else None."""
        with self._lock:
            found = self._services.get(kind)
        return found if isinstance(found, kind) else None

    def add_service(self, service: S) -> S:
        """Attach ``service`` (one per type) so the run closes it."""
        with self._lock:
            self._services[type(service)] = service
        return service

    def open_resource(self, query: str, key: str, resource: S) -> S:
        """Hold ``resource`` for query ``query`` until :meth:`close_resources` (its query
        stopped) or the run's end; one already held under ``key`` is closed first."""
        with self._lock:
            old = self._resources.pop((query, key), None)
            self._resources[(query, key)] = resource
        if old is not None:
            _close_quietly(old)
        return resource

    def held(self, query: str, key: str, kind: type[S], factory: Callable[[], S]) -> S:
        """The ``kind`` resource query ``query`` holds under ``key``, opened with
        ``factory()`` when it holds none (a batch written without its output opened)."""
        with self._lock:
            found = self._resources.get((query, key))
            if isinstance(found, kind):
                return found
        return self.open_resource(query, key, factory())

    def resource(self, query: str, key: str) -> Service | None:
        """The resource query ``query`` opened under ``key``, if it is open."""
        with self._lock:
            return self._resources.get((query, key))

    def close_resources(self, query: str) -> None:
        """Close what query ``query``'s outputs opened (its query stopped)."""
        with self._lock:
            mine = [k for k in self._resources if k[0] == query]
            held = [self._resources.pop(k) for k in mine]
        for resource in reversed(held):
            _close_quietly(resource)

    def close(self) -> None:
        """Close every resource and service, newest first; a second call does nothing."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            resources = list(self._resources.values())
            services = list(self._services.values())
            self._resources.clear()
            self._services.clear()
        for item in [*reversed(resources), *reversed(services)]:
            _close_quietly(item)
        self.memo.close()

    def __enter__(self) -> RunScope:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _close_quietly(item: Service) -> None:
    try:
        item.close()
    except Exception:  # one failing close must not keep the others open
        log.exception("closing %s", type(item).__name__)
