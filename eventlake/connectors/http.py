"""HTTP: every row POSTed to an endpoint with an idempotency key (Spark's ``foreach``)."""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eventlake.checkpoints import ensure_stream_id
from eventlake.connectors.base import Output
from eventlake.connectors.capabilities import Guarantee, OutputCapabilities
from eventlake.secrets import mask_text

if TYPE_CHECKING:
    from pyspark.sql import Row
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    from eventlake.context import FlowConfig, FlowContext

IDEMPOTENCY_HEADER = "Idempotency-Key"


class HttpRowWriter:
    """Spark's ``foreach`` writer protocol (``open``/``process``/``close``) for HTTP.

    One instance per partition and batch, on an executor. Each row is POSTed as JSON with
    ``Idempotency-Key: <stream id>:<flow>:<batch id>:<partition>:<row offset>``, where the
    stream id is the checkpoint's (a new checkpoint's batch ids restart at 0; its keys
    differ) and the offset counts rows within the partition's part of the batch.
    """

    def __init__(self, url: str, flow: str, timeout: float, stream: str) -> None:
        self.url = url
        self.flow = flow
        self.timeout = timeout
        self.stream = stream
        self.partition = -1
        self.batch = -1
        self.offset = 0

    def open(self, partition_id: int, epoch_id: int) -> bool:
        self.partition, self.batch, self.offset = partition_id, epoch_id, 0
        return True

    def key(self) -> str:
        return f"{self.stream}:{self.flow}:{self.batch}:{self.partition}:{self.offset}"

    def process(self, row: Row) -> None:
        body = json.dumps(row.asDict(recursive=True), default=str).encode()
        request = urllib.request.Request(  # the configured endpoint
            self.url,
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", IDEMPOTENCY_HEADER: self.key()},
        )
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
            if response.status >= 300:
                raise RuntimeError(f"{self.url} answered {response.status} for {self.key()}")
        self.offset += 1

    def close(self, error: Any) -> None:
        if error is not None:
            raise error


@dataclass(frozen=True)
class HttpOutput(Output):
    """POST every row as JSON to the URL ``pipelines.<p>.<url_param>``, one request per row.

    Delivery guarantee: at-least-once, made idempotent by the receiver. A failed or
    replayed batch sends its rows again with the same idempotency keys (the batch is
    replayed from the same offsets, so each partition yields the same rows in the same
    order as long as the flow's plan has no shuffle); a receiver that remembers keys it
    has seen applies each row once. A non-2xx answer fails the batch.
    """

    url_param: str
    timeout: float = 10.0
    capabilities = OutputCapabilities(
        guarantee=Guarantee.AT_LEAST_ONCE, output_modes=frozenset({"append", "update"})
    )

    def describe(self, flow: FlowConfig | None = None) -> str:
        # The URL without its credentials: a token in its query or user info stays out of
        # `list`, `status` and the dashboard.
        return f"http:{mask_text(flow.param(self.url_param)) if flow else self.url_param}"

    def start_writer(
        self, writer: DataStreamWriter, ctx: FlowContext, output_mode: str
    ) -> StreamingQuery:
        url = ctx.param(self.url_param)
        stream = ensure_stream_id(ctx.checkpoint)
        return writer.foreach(HttpRowWriter(url, ctx.query_name, self.timeout, stream)).start()
