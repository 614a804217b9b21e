"""PostgreSQL: upsert each batch into a table, exactly-once (a fan-out target).

The batch goes to a staging table through Spark's JDBC writer, then one transaction records
the batch in a commit table, applies the staged rows and drops the staging table.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eventlake.config.model import PostgresSettings
from eventlake.connectors.base import BatchContext, Prepare, Target
from eventlake.connectors.capabilities import Guarantee
from eventlake.errors import ErrorCode, EventlakeError, jvm_causes

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from eventlake.context import FlowConfig, FlowContext

COMMIT_TABLE = "eventlake_commits"
# SQLSTATEs of a lost connection: class 08 (connection exception), the server's shutdown
# (57P01 admin, 57P02 crash) and its refusal while starting or stopping (57P03).
_LOST_STATES = ("08", "57P01", "57P02", "57P03")


@dataclass(frozen=True)
class ToPostgres(Target):
    """Upsert each batch into the table ``pipelines.<p>.<table_param>``, keyed by ``key``,
    on the server of the ``postgres`` settings.

    Delivery guarantee: exactly-once. The batch first goes to a staging table through
    Spark's JDBC writer (nothing visible yet). Then one PostgreSQL transaction records
    ``(flow, target, stream, batch id)`` in ``eventlake_commits``, applies the staged
    rows to the table and drops the staging table. It commits all of that or nothing; a
    replayed batch finds its row in the commit table and is skipped.

    Rows apply with ``INSERT ... ON CONFLICT (key) DO UPDATE``; with ``order_by`` an
    incoming row only replaces a stored one that sorts strictly before it (an older event
    never overwrites a newer row). Rows whose ``delete_flag`` column is true delete the
    stored row instead (under the same guard); that column is not stored. The table is
    created on first use from the batch's columns, with ``key`` as its primary key. The
    batch must hold at most one row per key.
    """

    table_param: str
    key: tuple[str, ...]
    order_by: tuple[str, ...] = ()
    delete_flag: str | None = None
    prepare: Prepare | None = None
    guarantee = Guarantee.EXACTLY_ONCE

    def _table(self, flow: FlowConfig) -> str:
        return flow.param(self.table_param)

    def target_id(self, flow: FlowConfig) -> str:
        return f"postgres:{self._table(flow)}"

    def describe(self, flow: FlowConfig | None = None) -> str:
        return f"postgres:{self._table(flow) if flow else self.table_param}"

    def count_rows(self, flow: FlowConfig) -> dict[str, int | None]:
        import psycopg
        from psycopg import sql

        pg = flow.settings.postgres
        name = sql.Identifier(pg.schema_name, self._table(flow))
        try:
            with psycopg.connect(**pg.connect_kwargs(), connect_timeout=5) as conn:
                row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(name)).fetchone()
        except (psycopg.errors.UndefinedTable, psycopg.OperationalError):
            return {self.describe(flow): None}  # not created yet, or the server is down
        return {self.describe(flow): int(row[0]) if row else None}

    def open(self, ctx: FlowContext) -> None:
        """One connection for the query's life (reopened after a lost server)."""
        key = self.target_id(ctx)
        ctx.run.open_resource(ctx.query_name, key, PostgresConnection(ctx.settings.postgres))

    def _connection(self, batch: BatchContext) -> PostgresConnection:
        settings = batch.ctx.settings.postgres
        return batch.ctx.run.held(batch.flow, self.target_id(batch.ctx), PostgresConnection,
                                  lambda: PostgresConnection(settings))  # fmt: skip

    def write(self, df: DataFrame, batch: BatchContext) -> None:
        flow = batch.ctx
        upsert = _Upsert(
            settings=flow.settings.postgres,
            table=self._table(flow),
            name=self.target_id(flow),
            key=self.key,
            order_by=self.order_by,
            delete_flag=self.delete_flag,
        )
        connection = self._connection(batch)
        try:
            upsert.write(self.rows(df, batch), batch, connection)
        except Exception as exc:
            lost = connection.lost(exc)
            if lost is None:
                raise
            raise lost from exc


class PostgresConnection:
    """A PostgreSQL connection held open across batches (autocommit; each batch's apply
    runs in its own transaction), reconnected when the server closed or lost it."""

    def __init__(self, settings: PostgresSettings) -> None:
        self.settings = settings
        self._conn: Any = None

    def get(self) -> Any:
        """The open connection; EL-POSTGRES-003 when the server cannot be reached."""
        import psycopg

        if self._conn is not None and not self._gone():
            return self._conn
        self.close()
        try:
            conn = psycopg.connect(**self.settings.connect_kwargs(), connect_timeout=10)
        except psycopg.OperationalError as exc:
            # psycopg's message names host, port and user, never the password.
            raise EventlakeError(
                ErrorCode.POSTGRES_UNREACHABLE,
                f"cannot connect to PostgreSQL at {self.settings.host}:{self.settings.port} "
                f"as {self.settings.user}: {str(exc).strip()}",
            ) from exc
        conn.autocommit = True
        self._conn = conn
        return conn

    def lost(self, exc: BaseException) -> EventlakeError | None:
        """EL-POSTGRES-003 when ``exc`` came from losing a connection to the server (it shut
        down, crashed or went away), this one or one of Spark's JDBC writer (its SQLSTATE
        says so); the connection is then closed. None for any other error."""
        import psycopg

        gone = (psycopg.errors.AdminShutdown, psycopg.errors.CrashShutdown,
                psycopg.errors.CannotConnectNow)  # fmt: skip
        broken = self._conn is not None and self._gone()
        if isinstance(exc, gone) or (isinstance(exc, psycopg.OperationalError) and broken):
            cause, where = str(exc).strip(), ""
        else:
            jdbc = [c for c in jvm_causes(exc) if (c.sql_state or "").startswith(_LOST_STATES)]
            if not jdbc:
                return None
            cause, where = jdbc[-1].message.strip(), " while Spark's JDBC writer staged the batch"
        self.close()
        return EventlakeError(
            ErrorCode.POSTGRES_UNREACHABLE,
            f"lost the connection to PostgreSQL at {self.settings.host}:{self.settings.port} "
            f"as {self.settings.user}{where}: {cause}",
        )

    def _gone(self) -> bool:
        return bool(self._conn.closed or self._conn.broken)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


@dataclass(frozen=True)
class _Upsert:
    """One batch's upsert, with the target resolved against config."""

    settings: PostgresSettings
    table: str
    name: str
    key: tuple[str, ...]
    order_by: tuple[str, ...]
    delete_flag: str | None

    def _committed(self, conn: Any, batch: BatchContext) -> bool:
        from psycopg import sql

        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (flow TEXT NOT NULL, stream_id TEXT NOT NULL, "
                "batch_id BIGINT NOT NULL, committed_at TIMESTAMPTZ NOT NULL DEFAULT now(), "
                "PRIMARY KEY (flow, stream_id, batch_id))"
            ).format(self._ident(COMMIT_TABLE))
        )
        found = conn.execute(
            sql.SQL("SELECT 1 FROM {} WHERE flow = %s AND stream_id = %s AND batch_id = %s")
            .format(self._ident(COMMIT_TABLE)),
            (self._flow(batch), batch.stream_id, batch.batch_id),
        ).fetchone()  # fmt: skip
        return found is not None

    def _flow(self, batch: BatchContext) -> str:
        return f"{batch.flow}/{self.name}"

    def _ident(self, name: str) -> Any:
        from psycopg import sql

        return sql.Identifier(self.settings.schema_name, name)

    def _stage_name(self, batch: BatchContext) -> str:
        digest = hashlib.sha1(batch.app_id(self.name).encode()).hexdigest()[:12]
        return f"eventlake_stage_{digest}_{batch.batch_id}"

    def write(self, df: DataFrame, batch: BatchContext, connection: PostgresConnection) -> None:
        if self._committed(connection.get(), batch):
            return
        stage = self._stage_name(batch)
        (
            df.write.format("jdbc")
            .options(**self.settings.jdbc_options())
            .option("dbtable", f'"{self.settings.schema_name}"."{stage}"')
            .mode("overwrite")
            .save()
        )
        columns = [c for c in df.columns if c != self.delete_flag]
        conn = connection.get()
        with conn.transaction():
            self._apply(conn, batch, stage, columns)

    def _apply(self, conn: Any, batch: BatchContext, stage: str, columns: list[str]) -> None:
        from psycopg import sql

        done = conn.execute(
            sql.SQL(
                "INSERT INTO {} (flow, stream_id, batch_id) VALUES (%s, %s, %s) "
                "ON CONFLICT DO NOTHING RETURNING 1"
            ).format(self._ident(COMMIT_TABLE)),
            (self._flow(batch), batch.stream_id, batch.batch_id),
        ).fetchone()
        staged, target = self._ident(stage), self._ident(self.table)
        if done is not None:
            self._create_target(conn, staged, target, columns)
            self._delete(conn, staged, target)
            self._upsert(conn, staged, target, columns)
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(staged))

    def _create_target(self, conn: Any, staged: Any, target: Any, columns: list[str]) -> None:
        from psycopg import sql

        exists = conn.execute(
            "SELECT to_regclass(%s)", (f'"{self.settings.schema_name}"."{self.table}"',)
        ).fetchone()[0]
        if exists is not None:
            return
        cols = sql.SQL(", ").join(map(sql.Identifier, columns))
        keys = sql.SQL(", ").join(map(sql.Identifier, self.key))
        conn.execute(
            sql.SQL("CREATE TABLE {} AS SELECT {} FROM {} WITH NO DATA").format(
                target, cols, staged
            )
        )
        conn.execute(sql.SQL("ALTER TABLE {} ADD PRIMARY KEY ({})").format(target, keys))

    def _newer(self, old: str, new: str, *, strict: bool) -> Any:
        from psycopg import sql

        if not self.order_by:
            return sql.SQL("TRUE")
        row = sql.SQL("({})")
        left = row.format(sql.SQL(", ").join(sql.Identifier(old, c) for c in self.order_by))
        right = row.format(sql.SQL(", ").join(sql.Identifier(new, c) for c in self.order_by))
        return sql.SQL("{} {} {}").format(left, sql.SQL("<" if strict else "<="), right)

    def _delete(self, conn: Any, staged: Any, target: Any) -> None:
        from psycopg import sql

        if self.delete_flag is None:
            return
        same_key = sql.SQL(" AND ").join(
            sql.SQL("{} = {}").format(sql.Identifier("t", k), sql.Identifier("s", k))
            for k in self.key
        )
        conn.execute(
            sql.SQL("DELETE FROM {} AS t USING {} AS s WHERE {} AND s.{} AND {}").format(
                target,
                staged,
                same_key,
                sql.Identifier(self.delete_flag),
                self._newer("t", "s", strict=False),
            )
        )

    def _upsert(self, conn: Any, staged: Any, target: Any, columns: list[str]) -> None:
        from psycopg import sql

        cols = sql.SQL(", ").join(map(sql.Identifier, columns))
        keys = sql.SQL(", ").join(map(sql.Identifier, self.key))
        updates = sql.SQL(", ").join(
            sql.SQL("{} = EXCLUDED.{}").format(sql.Identifier(c), sql.Identifier(c))
            for c in columns
            if c not in self.key
        )
        where = (
            sql.SQL("WHERE NOT {}").format(sql.Identifier(self.delete_flag))
            if self.delete_flag
            else sql.SQL("")
        )
        parts = {"target": target, "alias": sql.Identifier(self.table), "cols": cols,
                 "staged": staged, "where": where, "keys": keys, "updates": updates,
                 "guard": self._newer(self.table, "excluded", strict=True)}  # fmt: skip
        upsert = sql.SQL(
            "INSERT INTO {target} AS {alias} ({cols}) SELECT {cols} FROM {staged} {where} "
            "ON CONFLICT ({keys}) DO UPDATE SET {updates} WHERE {guard}"
        )
        conn.execute(upsert.format(**parts))
