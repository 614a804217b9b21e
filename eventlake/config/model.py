"""The settings model. Every section rejects unknown keys, so a typo is an error, not a no-op."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    field_validator,
    model_validator,
)

from eventlake.durations import SparkInterval
from eventlake.paths import state_dir
from eventlake.storage import Location


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class KafkaSettings(_Section):
    bootstrap_servers: str = "127.0.0.1:9092"
    security_protocol: str | None = None
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    #: A PEM file of the CA that signed the brokers' certificates, for a private CA (a
    #: managed Kafka whose certificates a public CA signed needs none).
    ssl_ca_location: str | None = None
    #: Further Java Kafka client properties for Spark's Kafka source and sink, by their
    #: Kafka names (``default.api.timeout.ms``, ``client.dns.lookup``); they win over
    #: eventlake's own. Values under secret-looking names are never shown.
    java_properties: dict[str, str | bool | int | float] = Field(default_factory=dict)

    def _shared_options(self) -> dict[str, str]:
        """The client properties librdkafka and the Java client name alike."""
        pairs = (("bootstrap.servers", self.bootstrap_servers),
                 ("security.protocol", self.security_protocol),
                 ("sasl.mechanism", self.sasl_mechanism))  # fmt: skip
        return {key: value for key, value in pairs if value}

    def client_options(self) -> dict[str, str]:
        """Options for confluent-kafka clients (librdkafka names)."""
        opts = self._shared_options()
        if self.ssl_ca_location:
            opts["ssl.ca.location"] = self.ssl_ca_location
        if self.sasl_username:
            opts["sasl.username"] = self.sasl_username
        if self.sasl_password:
            opts["sasl.password"] = self.sasl_password.get_secret_value()
        return opts

    def spark_options(self) -> dict[str, str]:
        """Options for Spark's Kafka source and sink (``kafka.``-prefixed Java client names)."""
        opts = {f"kafka.{key}": value for key, value in self._shared_options().items()}
        if self.ssl_ca_location:
            opts["kafka.ssl.truststore.type"] = "PEM"
            opts["kafka.ssl.truststore.location"] = self.ssl_ca_location
        if self.sasl_username and self.sasl_password:
            user = self.sasl_username.replace('"', '\\"')
            pwd = self.sasl_password.get_secret_value().replace('"', '\\"')
            scram = (self.sasl_mechanism or "").upper().startswith("SCRAM-")
            module = "scram.ScramLoginModule" if scram else "plain.PlainLoginModule"
            opts["kafka.sasl.jaas.config"] = (
                f"org.apache.kafka.common.security.{module} required "
                f'username="{user}" password="{pwd}";'
            )
        opts.update({f"kafka.{key}": _java_value(v) for key, v in self.java_properties.items()})
        return opts


def _java_value(value: str | bool | int | float) -> str:
    """A YAML scalar as a Java client property (``true``, not ``True``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


class LakeSettings(_Section):
    #: A local folder or a URI (``hdfs://nn:8020/lake``, ``s3a://bucket/lake``).
    root: Location = Field(default_factory=lambda: Location(".eventlake/lake"))
    #: The Delta tables eventlake creates as sinks get a log checkpoint after this many
    #: commits, written by eventlake on a thread of its own rather than by Delta inside the
    #: commit that reaches it (which stalls that batch for seconds). 0: Delta's own, inline,
    #: every 100 commits.
    log_checkpoint_commits: int = Field(default=100, ge=0)

    def table_path(self, layer: str, table: str) -> Location:
        return self.root / layer / table


class CheckpointSettings(_Section):
    #: A local folder or a URI, as ``lake.root``.
    root: Location = Field(default_factory=lambda: Location(".eventlake/checkpoints"))

    def for_flow(self, pipeline: str, flow: str) -> Location:
        return self.root / pipeline / flow


class SparkSettings(_Section):
    master: str = "local[*]"
    #: Tries of a failing task under a ``local`` or ``local[N]`` master (a cluster's are
    #: ``spark.task.maxFailures``, 4): a transient task failure costs the task, not the query.
    task_attempts: int = Field(default=4, ge=1)
    app_name: str = "eventlake"
    log_level: str = "WARN"
    #: Start the driver JVM with the class-data archive ``eventlake jars fetch`` built
    #: (seconds off its start and its first Delta and Kafka operations) when there is one.
    class_archive: bool = True
    #: Every this many seconds the driver JVM (HotSpot's periodic native trim, where its
    #: Java has it) and, while a run lasts, the driver's Python process (glibc's
    #: ``malloc_trim``) hand their C heap's free memory back to the system; 0 turns it off.
    native_trim_seconds: float = Field(default=60, ge=0)
    #: The glibc arenas the driver's Python process allocates from, set when a run or the
    #: SparkSession starts: 1 (the threads started after share the main arena, which the
    #: trim above gives back to its top), or 0 for glibc's default of eight per core.
    driver_arenas: int = Field(default=1, ge=0)
    #: glibc's mmap threshold in the driver's Python process (bytes), fixed when a run or the
    #: SparkSession starts: blocks this size and larger are mapped on their own and given
    #: back when freed; 0 keeps glibc's own, which rises as large blocks are freed.
    driver_mmap_threshold: int = Field(default=128 * 1024, ge=0, le=32 * 1024 * 1024)
    #: The driver JVM's garbage collector: ``auto`` is Parallel (throughput) for a run
    #: whose every flow ends (``available-now``, ``once``) and the JVM's default, G1
    #: (short pauses), for a run that lasts; ``g1`` or ``parallel`` for every run. A
    #: collector named in ``spark.driver.extraJavaOptions`` wins.
    gc: Literal["auto", "g1", "parallel"] = "auto"
    #: The driver JVM's C allocator: ``system`` (the C library's malloc) or ``jemalloc``
    #: (preloaded from the system's libjemalloc; EL-JAVA-002 when it is not installed).
    allocator: Literal["system", "jemalloc"] = "system"
    #: Where each eventlake process keeps a folder of Spark's local files (under a local
    #: master) and its JVM's temporary files, instead of /tmp; default ``scratch`` beside
    #: the logs. A start removes the folders of processes gone.
    scratch_dir: Path | None = None
    # Applied last, so any Spark setting eventlake chooses can be overridden here.
    conf: dict[str, str] = Field(default_factory=dict)

    @field_validator("conf", mode="before")
    @classmethod
    def _as_text(cls, value: object) -> object:
        """Spark confs are text; YAML gives numbers and booleans, so spell them as Spark does."""
        if not isinstance(value, dict):
            return value
        return {
            str(k): (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in value.items()
        }


class PostgresSettings(_Section):
    """A PostgreSQL server for ToPostgres targets (the embedded one by default)."""

    host: str = "127.0.0.1"
    port: int = 55432
    database: str = "eventlake"
    user: str = "eventlake"
    password: SecretStr | None = None
    schema_name: str = Field(default="public", alias="schema")

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    def jdbc_url(self) -> str:
        return f"jdbc:postgresql://{self.host}:{self.port}/{self.database}"

    def generated_password_file(self) -> Path:
        """Where the embedded server keeps the password it generated on first start (0600),
        when ``password`` is not set."""
        return state_dir() / "postgres" / f"{self.port}.password"

    def resolved_password(self) -> str | None:
        """``password``, else the embedded server's generated one (loopback only)."""
        if self.password is not None:
            return self.password.get_secret_value()
        generated = self.generated_password_file()
        if self.host in ("127.0.0.1", "localhost", "::1") and generated.is_file():
            return generated.read_text().strip()
        return None

    def jdbc_options(self) -> dict[str, str]:
        """Options for Spark's JDBC writer (the password is redacted from Spark's plans)."""
        opts = {"url": self.jdbc_url(), "user": self.user, "driver": "org.postgresql.Driver"}
        password = self.resolved_password()
        if password is not None:
            opts["password"] = password
        return opts

    def connect_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``psycopg.connect``."""
        kwargs: dict[str, Any] = {
            "host": self.host, "port": self.port, "dbname": self.database, "user": self.user,
        }  # fmt: skip
        password = self.resolved_password()
        if password is not None:
            kwargs["password"] = password
        return kwargs


class MetricsSettings(_Section):
    """Where a run serves ``/metrics``, ``/api/status`` and the dashboard (no port: not
    served; ``run --metrics-port`` overrides)."""

    port: int | None = Field(default=None, ge=0, le=65535)
    #: 0.0.0.0 lets a Prometheus on another host scrape it; any host but loopback needs
    #: ``token``.
    host: str = "127.0.0.1"
    #: ``/readyz`` answers 503 while a flow's oldest unprocessed Kafka record is older.
    ready_lag: SparkInterval = "5 minutes"
    #: Clients send ``Authorization: Bearer <token>`` for ``/metrics``, ``/api/*``
    #: (``${EVENTLAKE_METRICS_TOKEN}`` in the YAML keeps it in the environment).
    token: SecretStr | None = None
    #: PEM certificate (chain) and key: served over HTTPS when both are set.
    tls_cert: Path | None = None
    tls_key: Path | None = None
    #: A lateness measure reads at most this many of the newest records, for at most
    #: ``lateness_timeout``; one runs at a time.
    lateness_max_rows: int = Field(default=1_000_000, ge=1)
    lateness_timeout: SparkInterval = "2 minutes"

    @model_validator(mode="after")
    def _tls_pair(self) -> MetricsSettings:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("set both tls_cert and tls_key, or neither")
        return self


class RestartSettings(_Section):
    """How a failed flow is restarted from its checkpoint while the others keep running
    (Flink's restart strategies; errors whose recovery is fatal are never restarted).

    ``exponential-delay`` (the default) waits ``initial_delay``, then ``multiplier`` times
    longer after each failure up to ``max_delay``, each wait spread by +/- ``jitter``; a flow
    that ran ``reset_after`` without failing starts over at ``initial_delay``.
    ``fixed-delay`` waits ``delay`` each time. Both give up after ``attempts`` restarts in a
    row (None: never). ``failure-rate`` waits ``delay`` and gives up when more than
    ``failures_per_interval`` failures fall within ``failure_interval``. ``none`` never
    restarts. Finite triggers (available-now, once) restart a flow at most
    ``finite_attempts`` times, then the run exits non-zero.
    """

    strategy: Literal["exponential-delay", "fixed-delay", "failure-rate", "none"] = (
        "exponential-delay"
    )
    initial_delay: SparkInterval = "1 second"
    multiplier: float = Field(default=1.5, ge=1.0)
    max_delay: SparkInterval = "1 minute"
    reset_after: SparkInterval = "1 hour"
    jitter: float = Field(default=0.1, ge=0.0, le=1.0)
    attempts: int | None = Field(default=None, ge=0)
    delay: SparkInterval = "10 seconds"
    failures_per_interval: int = Field(default=3, ge=1)
    failure_interval: SparkInterval = "5 minutes"
    finite_attempts: int = Field(default=3, ge=0)


class MaintenanceOverride(_Section):
    """Maintenance settings of one table or pipeline; an unset key keeps the default's."""

    enabled: bool | None = None
    small_file_bytes: int | None = Field(default=None, ge=1024)
    compact_min_files: int | None = Field(default=None, ge=2)
    vacuum_retention: SparkInterval | None = None
    vacuum_interval: SparkInterval | None = None
    log_retention: SparkInterval | None = None
    log_retention_commits: int | None = Field(default=None, ge=0)


class MaintenanceSettings(_Section):
    """Keeping the Delta tables eventlake writes healthy while a run goes on: compaction
    of small files (clustering for clustered tables), VACUUM, log retention. A service of
    the run does it between batches; ``eventlake maintain`` does it on demand."""

    enabled: bool = True
    #: A data file under this many bytes counts as small.
    small_file_bytes: int = Field(default=32 * 1024 * 1024, ge=1024)
    #: A table is compacted (clustered tables: clustered) once it holds this many small files.
    compact_min_files: int = Field(default=64, ge=2)
    #: VACUUM keeps files a version of this age still needs (longer when a flow of the run
    #: still reads an older version): Delta's own default.
    vacuum_retention: SparkInterval = "7 days"
    #: How often a table is vacuumed.
    vacuum_interval: SparkInterval = "1 day"
    #: Log entries older than this are removed at the next log checkpoint. Spark lists the
    #: whole log at every Delta operation on a local or HDFS table, so each kept commit
    #: costs every batch; beyond ``vacuum_retention`` the files they name are gone anyway.
    log_retention: SparkInterval = "7 days"
    #: The log keeps at most about this many commits, however young: a table committed to
    #: every second would gather 600,000 in 7 days, and its readers would list them all at
    #: every batch. Never a commit a flow reading the table (any pipeline whose checkpoint
    #: is under ``checkpoints.root``) may still replay; time travel reaches no further back
    #: (at a 10-second trigger, 2,000 commits are 5.6 hours). 0: only ``log_retention``
    #: bounds the log.
    log_retention_commits: int = Field(default=2_000, ge=0)
    #: Per table (``layer/table``) overrides.
    tables: dict[str, MaintenanceOverride] = Field(default_factory=dict)

    def for_table(
        self, table: str, pipeline: MaintenanceOverride | None = None
    ) -> MaintenanceSettings:
        """The settings of ``layer/table``: these, the pipeline's, then the table's own."""
        update: dict[str, Any] = {}
        for override in (pipeline, self.tables.get(table)):
            if override is not None:
                update.update(override.model_dump(exclude_none=True))
        return self.model_copy(update=update) if update else self


class ProjectSettings(_Section):
    """What the project is made of: its pipeline modules, and whether eventlake's example
    pipelines are loaded beside them."""

    #: Python files declaring the project's pipelines: globs relative to the config file's
    #: folder (``pipelines/*.py``), loaded by every command without ``--module``.
    modules: tuple[str, ...] = ()
    #: eventlake's example pipelines (orders, users, clickstream, ads, sensors, alerts).
    #: A project pipeline of the same name wins over an example.
    examples: bool = False


class JarSettings(_Section):
    """Where the locked JVM jars are downloaded from on first use."""

    #: A Maven repository mirroring Maven Central (``https://user:pass@host/maven2``);
    #: unset: ``EVENTLAKE_MAVEN_REPOSITORY``, else Maven Central.
    repository: str | None = None


class LogSettings(_Section):
    """Where Spark's, the JVM's and libraries' own output goes (not the console)."""

    #: Default: ``logs/eventlake.log`` beside a local checkpoints root, else in the
    #: project's state folder (``.eventlake``).
    file: Path | None = None
    #: A run rotates the file once it passes this size (None: never, when something else
    #: rotates it; that must copy and truncate, as the JVM keeps the file open).
    max_bytes: int | None = Field(default=100 * 1024 * 1024, ge=1024)
    #: Rotated files kept beside it: ``eventlake.log.1`` (the newest) to ``.<keep>``.
    keep: int = Field(default=5, ge=1)


class Settings(_Section):
    #: Marks a production config: warnings about local or temporary storage apply.
    production: bool = False
    project: ProjectSettings = Field(default_factory=ProjectSettings)
    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    lake: LakeSettings = Field(default_factory=LakeSettings)
    checkpoints: CheckpointSettings = Field(default_factory=CheckpointSettings)
    spark: SparkSettings = Field(default_factory=SparkSettings)
    postgres: PostgresSettings = Field(default_factory=PostgresSettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    log: LogSettings = Field(default_factory=LogSettings)
    jars: JarSettings = Field(default_factory=JarSettings)
    maintenance: MaintenanceSettings = Field(default_factory=MaintenanceSettings)
    #: Every pipeline's restart strategy, unless its section sets ``restart``.
    restart: RestartSettings = Field(default_factory=RestartSettings)
    pipelines: dict[str, dict[str, Any]] = Field(default_factory=dict)
    _from_secret_env: tuple[str, ...] = PrivateAttr(default=())
    _base_dir: Path | None = PrivateAttr(default=None)

    def with_base_dir(self, base: Path) -> Settings:
        """These settings, read from a config file in ``base`` (relative module globs)."""
        self._base_dir = base.absolute()
        return self

    def project_modules(self) -> list[Path]:
        """The files ``project.modules`` names, each once, in glob order."""
        base = self._base_dir or Path.cwd()
        found: dict[Path, None] = {}
        for pattern in self.project.modules:
            anchored = Path(pattern) if Path(pattern).is_absolute() else base / pattern
            matches = sorted(Path(anchored.anchor).glob(str(anchored.relative_to(anchored.anchor))))
            found.update(dict.fromkeys(m for m in matches if m.suffix == ".py"))
        return list(found)

    def with_secret_env(self, values: tuple[str, ...]) -> Settings:
        """These settings, knowing which values came from secret environment variables."""
        self._from_secret_env = values
        return self

    @property
    def secret_values(self) -> tuple[str, ...]:
        """Every value no output may show: declared secret fields, ``spark.conf`` entries
        and pipeline params whose keys look secret, and what ``${VAR}`` references to
        variables whose names look secret gave."""
        from eventlake.secrets import secret_name

        declared = (self.kafka.sasl_password, self.metrics.token)
        found = [s.get_secret_value() for s in declared if s is not None]
        found += [p for p in (self.postgres.resolved_password(),) if p]
        found += [str(v) for k, v in self.spark.conf.items() if secret_name(k)]
        found += [str(v) for k, v in self.kafka.java_properties.items() if secret_name(k)]
        found += [str(v) for params in self.pipelines.values() for k, v in params.items()
                  if secret_name(k) and isinstance(v, (str, int))]  # fmt: skip
        return (*self._from_secret_env, *found)

    def log_file(self) -> Path:
        """The log file of Spark, the JVM and libraries."""
        if self.log.file is not None:
            return self.log.file.absolute()
        return self._local_base() / "logs" / "eventlake.log"

    def scratch_root(self) -> Path:
        """The folder of the processes' scratch folders (``spark.scratch_dir``)."""
        if self.spark.scratch_dir is not None:
            return self.spark.scratch_dir.absolute()
        return self._local_base() / "scratch"

    def _local_base(self) -> Path:
        root = self.checkpoints.root
        return root.parent.path if root.is_local else state_dir()
