"""Background processes eventlake starts (Kafka brokers, a Spark standalone cluster, the
tests' HDFS): ports, pid files checked against the process's command line, Java,
launching, waiting until ready, stopping; :class:`ManagedProcess` holds them together."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from eventlake.errors import ErrorCode, EventlakeError

HOST = "127.0.0.1"


#: Ports under this are left to well-known services.
_LOWEST_PORT = 10000
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


@contextlib.contextmanager
def scoped_env(name: str, value: str | None) -> Iterator[None]:
    """The environment variable ``name`` set to ``value`` in this process while the block
    runs (a process started inside gets a copy), as it was after; nothing when None."""
    if value is None:
        yield
        return
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def ephemeral_ports() -> range:
    """The ports the kernel gives outgoing connections (Linux's setting; elsewhere a
    range that covers every system's default)."""
    try:
        low, high = (int(v) for v in _EPHEMERAL_RANGE.read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 65535
    return range(low, high + 1)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago, outside the ephemeral range:
    until the caller binds it, any process's outgoing connection could take a port of
    that range as its own (a broker then fails to start: address in use); another
    listener is the only thing that can take one outside it."""
    ephemeral = ephemeral_ports()
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(_LOWEST_PORT, 65536)
        if port in ephemeral:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((HOST, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def port_open(port: int) -> bool:
    """Whether something accepts connections on ``port`` of 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((HOST, port)) == 0


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, exited but not reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def running_pid(pid_file: Path, marker: str) -> int | None:
    """The pid in ``pid_file`` if that process runs and its command line holds ``marker``
    (a recycled pid that now belongs to another program is not ours)."""
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    if not pid_alive(pid):
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return pid
    return pid if marker.encode() in cmdline else None


def java_executable(purpose: str) -> str:
    """``$JAVA_HOME/bin/java`` or ``java`` on PATH; EL-JAVA-001 when there is none."""
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not Path(java).exists():
        raise EventlakeError(
            ErrorCode.JAVA_MISSING,
            f"no `java` executable found to run {purpose}.",
            expected="Java 17 or newer on PATH or in JAVA_HOME",
            fix="install a JDK 17 (Debian: apt-get install openjdk-17-jdk-headless)",
        )
    return java


def _reap(pid: int) -> None:
    """Collect ``pid``'s exit status if it is our exited child."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def stop_pid(pid: int, *, timeout: float) -> None:
    """SIGTERM ``pid``; SIGKILL it if it still runs after ``timeout`` seconds."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while pid_alive(pid) and time.monotonic() < deadline:
        _reap(pid)
        time.sleep(0.1)
    if pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        while pid_alive(pid):
            _reap(pid)
            time.sleep(0.05)
    _reap(pid)


def stop_pid_file(pid_file: Path, marker: str, *, timeout: float) -> bool:
    """Stop the process of ``pid_file`` (see :func:`running_pid`) and remove the file;
    False when it was not running."""
    pid = running_pid(pid_file, marker)
    if pid is not None:
        stop_pid(pid, timeout=timeout)
    pid_file.unlink(missing_ok=True)
    return pid is not None


class ManagedProcess:
    """One background process eventlake starts and finds again from another call: its pid
    file (trusted only while the process's command line holds ``marker``), its log, a
    launch detached from the caller's session, a bounded wait until it is ready, a stop
    (SIGTERM, then SIGKILL) and the tail of its log for errors.

    ``failed`` is the error code a start that exits or stays mute raises; ``fix`` says
    what to do then.
    """

    def __init__(
        self, name: str, *, pid_file: Path, marker: str, log_file: Path,
        failed: ErrorCode, fix: str,
    ) -> None:  # fmt: skip
        self.name = name
        self.pid_file = pid_file
        self.marker = marker
        self.log_file = log_file
        self.failed = failed
        self.fix = fix

    def pid(self) -> int | None:
        """The pid of the running process, or None."""
        return running_pid(self.pid_file, self.marker)

    def launch(
        self, cmd: list[str], *, cwd: Path, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """Start ``cmd`` in the background (its output appended to the log) and record
        its pid; it outlives the caller until :meth:`stop`."""
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as out:
            proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, cwd=cwd, env=env,
            )  # fmt: skip
        self.pid_file.write_text(str(proc.pid))
        return proc

    def await_ready(
        self,
        ready: Callable[[], bool],
        procs: list[subprocess.Popen[bytes]],
        *,
        timeout: float,
        where: str,
        on_failure: Callable[[], object] | None = None,
    ) -> None:
        """Return once ``ready()``; the ``failed`` error when one of ``procs`` exits first
        (with the log's last lines) or ``timeout`` passes (``on_failure``, else this
        process's :meth:`stop`, runs first)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for proc in procs:
                if proc.poll() is not None:
                    (on_failure or self.stop)()
                    raise EventlakeError(
                        self.failed,
                        f"{self.name} exited with code {proc.returncode} during start. "
                        f"Last log lines:\n{self.tail()}",
                        expected=f"{self.name} answering {where}",
                        fix=self.fix,
                    )
            if ready():
                return
            time.sleep(0.25)
        (on_failure or self.stop)()
        raise EventlakeError(
            self.failed,
            f"{self.name} did not answer {where} within {timeout:.0f}s.",
            fix=f"{self.fix}; the machine may be overloaded",
        )

    def stop(self, *, timeout: float = 30.0) -> bool:
        """Stop it (SIGTERM, then SIGKILL after ``timeout``); False when it was not
        running. Safe to call any number of times."""
        return stop_pid_file(self.pid_file, self.marker, timeout=timeout)

    def tail(self, lines: int = 15, *more: Path) -> str:
        """The last ``lines`` lines of its log (and of the files ``more``)."""
        texts: list[str] = []
        for f in (self.log_file, *more):
            if f.is_file():
                texts.extend(f.read_text(errors="replace").splitlines()[-lines:])
        return "\n".join(texts[-lines:])
