"""A local PostgreSQL server (Debian's ``postgresql`` package) on a data folder of ours.

``start`` creates the cluster on first use (``initdb`` with password authentication for
the configured user), starts it on 127.0.0.1 with ``pg_ctl`` and creates the database.
PostgreSQL refuses to run as root, so as root every server command runs as the
``postgres`` system user, which then owns the data folder. The password is passed to
``initdb`` in a private file, never on a command line, and never printed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from eventlake.config.model import PostgresSettings
from eventlake.errors import ErrorCode, EventlakeError
from eventlake.paths import state_dir

PG_BIN_ENV = "EVENTLAKE_PG_BIN"
INSTALL_FIX = (
    "install PostgreSQL's server (in this repository: `make postgres`; Debian: apt-get install "
    "postgresql; macOS: brew install postgresql), or point EVENTLAKE_PG_BIN at its bin folder"
)
#: Where distributions put the server's programs when not on PATH: Debian, RHEL.
DISTRIBUTION_GLOBS = ("/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin")


def _server_bin(folder: Path) -> bool:
    return all((folder / name).is_file() for name in ("initdb", "pg_ctl", "postgres"))


def _version(folder: Path) -> tuple[int, ...]:
    digits = "".join(c if c.isdigit() else " " for c in folder.parent.name).split()
    return tuple(int(d) for d in digits)


def bin_dir_candidates() -> list[Path]:
    """Where the server's programs may be, in the order they are tried:
    ``EVENTLAKE_PG_BIN``, ``pg_config --bindir``, ``pg_ctl`` on PATH, then the
    distributions' folders (the newest version first)."""
    found: list[Path] = []
    if os.environ.get(PG_BIN_ENV):
        found.append(Path(os.environ[PG_BIN_ENV]))
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True,
                                 timeout=10, check=True).stdout.strip()  # fmt: skip
            if out:
                found.append(Path(out))
    pg_ctl = shutil.which("pg_ctl")
    if pg_ctl is not None:
        found.append(Path(pg_ctl).resolve().parent)
    for pattern in DISTRIBUTION_GLOBS:
        root = Path(pattern.split("*")[0]).parent
        matches = root.glob(pattern.removeprefix(str(root) + "/"))
        found += sorted(matches, key=_version, reverse=True)
    return list(dict.fromkeys(found))


def find_bin_dir() -> Path:
    """The first folder of :func:`bin_dir_candidates` holding ``initdb``, ``pg_ctl`` and
    ``postgres``."""
    candidates = bin_dir_candidates()
    for folder in candidates:
        if _server_bin(folder):
            return folder
    if os.environ.get(PG_BIN_ENV):
        what = f"{PG_BIN_ENV}={os.environ[PG_BIN_ENV]} holds no initdb, pg_ctl and postgres."
    else:
        looked = ", ".join(str(c) for c in candidates) or "no pg_config or pg_ctl on PATH"
        what = f"No PostgreSQL server is installed (looked in: {looked})."
    raise EventlakeError(
        ErrorCode.POSTGRES_MISSING,
        what,
        expected="PostgreSQL's initdb, pg_ctl and postgres",
        fix=INSTALL_FIX,
    )


def _as_root() -> bool:
    return os.geteuid() == 0


def _reachable_by_others(path: Path) -> bool:
    return all(os.stat(p).st_mode & 0o001 for p in [path, *path.parents] if p.exists())


@dataclass
class EmbeddedPostgres:
    settings: PostgresSettings
    data_dir: Path | None = None

    def __post_init__(self) -> None:
        folder = self.data_dir or state_dir() / "postgres" / str(self.settings.port)
        folder = folder.resolve()
        if _as_root() and not _reachable_by_others(folder if folder.exists() else folder.parent):
            # The postgres user must reach its data folder: use one in /tmp instead.
            digest = hashlib.sha1(str(folder).encode()).hexdigest()[:10]
            folder = Path(tempfile.gettempdir()) / f"eventlake-postgres-{digest}"
        self.data_dir = folder

    @property
    def cluster(self) -> Path:
        assert self.data_dir is not None
        return self.data_dir / "cluster"

    @property
    def log_file(self) -> Path:
        assert self.data_dir is not None
        return self.data_dir / "postgres.log"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(find_bin_dir() / args[0]), *args[1:]]
        if _as_root():
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, capture_output=True, text=True, check=check)

    def _own(self, path: Path) -> None:
        if _as_root():
            shutil.chown(path, "postgres", "postgres")

    def _init(self) -> None:
        assert self.data_dir is not None
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._own(self.data_dir)
        password = self.settings.resolved_password() or self._generate_password()
        with tempfile.NamedTemporaryFile("w", dir=self.data_dir, delete=False) as pwfile:
            pwfile.write(password + "\n")
        secret = Path(pwfile.name)
        try:
            os.chmod(secret, 0o600)
            self._own(secret)
            result = self._run(
                "initdb", "-D", str(self.cluster), "-U", self.settings.user,
                f"--pwfile={secret}", "--auth-local=scram-sha-256",
                "--auth-host=scram-sha-256", "--encoding=UTF8", "--no-sync", check=False,
            )  # fmt: skip
        finally:
            secret.unlink(missing_ok=True)
        if result.returncode != 0:
            raise EventlakeError(
                ErrorCode.POSTGRES_START_FAILED,
                f"initdb failed for {self.cluster}: {result.stderr.strip()[-500:]}",
                fix=f"remove {self.data_dir} if it holds a broken cluster, then start again",
            )

    def _generate_password(self) -> str:
        """A new random password for a cluster created without ``postgres.password``,
        kept for eventlake's clients in a file only this user reads."""
        path = self.settings.generated_password_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        password = secrets.token_urlsafe(24)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as out:
            out.write(password + "\n")
        return password

    def is_running(self) -> bool:
        if not (self.cluster / "PG_VERSION").exists():
            return False
        return self._run("pg_ctl", "-D", str(self.cluster), "status", check=False).returncode == 0

    def start(self, timeout: float = 60.0) -> None:
        """Start the server (creating the cluster and database on first use); idempotent."""
        if not (self.cluster / "PG_VERSION").exists():
            self._init()
        if not self.is_running():
            options = (
                f"-c port={self.settings.port} -c listen_addresses={self.settings.host} "
                f"-c unix_socket_directories={self.cluster} -c fsync=off"
            )
            result = self._run(
                "pg_ctl", "-D", str(self.cluster), "-l", str(self.log_file), "-o", options,
                "-w", "-t", str(int(timeout)), "start", check=False,
            )  # fmt: skip
            if result.returncode != 0:
                tail = self.log_file.read_text()[-800:] if self.log_file.exists() else ""
                raise EventlakeError(
                    ErrorCode.POSTGRES_START_FAILED,
                    f"PostgreSQL did not start on port {self.settings.port}: "
                    f"{result.stderr.strip()} {tail}",
                    fix="free the port (postgres.port) or look at " + str(self.log_file),
                )
        self._create_database(timeout)

    def _create_database(self, timeout: float) -> None:
        import psycopg

        admin = {**self.settings.connect_kwargs(), "dbname": "postgres"}
        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(**admin, autocommit=True, connect_timeout=5) as conn:
                    found = conn.execute(
                        "SELECT 1 FROM pg_database WHERE datname = %s", (self.settings.database,)
                    ).fetchone()
                    if not found:
                        conn.execute(f'CREATE DATABASE "{self.settings.database}"')
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def stop(self) -> None:
        """Stop the server (fast shutdown); safe when it is not running."""
        if self.is_running():
            self._run("pg_ctl", "-D", str(self.cluster), "-m", "fast", "-w", "stop", check=False)

    def remove(self) -> None:
        self.stop()
        if self.data_dir is not None:
            with contextlib.suppress(FileNotFoundError):
                shutil.rmtree(self.data_dir)
