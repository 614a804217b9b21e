"""The foreach row sink: every row POSTed once per attempt, with a stable idempotency key."""

from __future__ import annotations

import json
import shutil
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from eventlake.checkpoints import stream_id
from eventlake.connectors import FilesInput, HttpOutput
from eventlake.connectors.http import IDEMPOTENCY_HEADER
from eventlake.pipelines import FlowContext, Pipeline, PipelineParams
from eventlake.testing import run_available_now, settings_for

pytestmark = pytest.mark.integration


class HttpParams(PipelineParams):
    url: str | None = None


http_demo = Pipeline("http_demo", params=HttpParams)


@http_demo.flow(input=FilesInput("inbox", "json", "id INT"), output=HttpOutput("url"))
def rows(ctx: FlowContext, df: DataFrame) -> DataFrame:
    return df


class Receiver(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.keys: Counter[str] = Counter()
        self.bodies: dict[str, Any] = {}
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/events"


class Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        key = self.headers[IDEMPOTENCY_HEADER]
        with self.server.lock:
            self.server.keys[key] += 1
            self.server.bodies[key] = body
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()


def test_rows_arrive_with_distinct_keys_and_a_replay_repeats_them(
    spark: SparkSession, receiver: Receiver, tmp_path: Path
) -> None:
    inbox = tmp_path / "lake" / "inbox"
    inbox.mkdir(parents=True)
    (inbox / "a.json").write_text("".join(json.dumps({"id": i}) + "\n" for i in range(25)))
    settings = settings_for(tmp_path, http_demo={"url": receiver.url})
    checkpoint = settings.checkpoints.for_flow("http_demo", "rows").path
    run_available_now(http_demo, settings)

    assert sum(receiver.keys.values()) == 25
    assert len(receiver.keys) == 25  # one distinct key per row
    assert sorted(b["id"] for b in receiver.bodies.values()) == list(range(25))
    streams = {k.split(":")[0] for k in receiver.keys}
    flows = {k.split(":")[1] for k in receiver.keys}
    batches = {k.split(":")[2] for k in receiver.keys}
    assert streams == {stream_id(checkpoint)}  # the id Spark keeps in the checkpoint
    assert flows == {"http_demo.rows"}
    assert batches == {"0"}

    # Replay batch 0 (as after a crash before its commit): same keys, same rows.
    first = dict(receiver.bodies)
    for name in ("commits/0", "commits/.0.crc"):
        (checkpoint / name).unlink(missing_ok=True)
    run_available_now(http_demo, settings)
    assert set(receiver.keys.values()) == {2}  # every key seen exactly twice
    assert receiver.bodies == first  # a receiver de-duplicating by key applies each row once

    # A reset checkpoint starts again at batch 0: its keys are new, so a receiver that
    # de-duplicates by key takes every new row (with <flow>:<batch>:... it dropped them).
    shutil.rmtree(checkpoint)
    (inbox / "a.json").unlink()
    (inbox / "b.json").write_text("".join(json.dumps({"id": i}) + "\n" for i in range(100, 125)))
    run_available_now(http_demo, settings)
    fresh = {k: b for k, b in receiver.bodies.items() if k not in first}
    assert len(fresh) == 25
    assert sorted(b["id"] for b in fresh.values()) == list(range(100, 125))
    assert {k.split(":")[0] for k in fresh} == {stream_id(checkpoint)} != streams
    assert {k.split(":")[2] for k in fresh} == {"0"}
