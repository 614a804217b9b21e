"""The standalone cluster's refusals and the code archive shipped to executors."""

from __future__ import annotations

import socket
import zipfile
from pathlib import Path

import pytest

from eventlake.cluster import SparkStandaloneCluster, code_archive, master_ui_url
from eventlake.errors import ErrorCode, EventlakeError
from eventlake.pipelines.loader import USER_MODULE_PREFIX, load_module


def test_the_archive_holds_eventlake_and_each_loaded_user_module(tmp_path: Path) -> None:
    module_file = tmp_path / "my_flows.py"
    module_file.write_text("ANSWER = 42\n")
    module = load_module(module_file)
    archive = code_archive(tmp_path / "out")
    with zipfile.ZipFile(archive) as z:
        names = set(z.namelist())
        shipped = z.read(f"{module.__name__}.py")
    assert module.__name__.startswith(f"{USER_MODULE_PREFIX}my_flows_")
    assert shipped == module_file.read_bytes()
    assert {"eventlake/__init__.py", "eventlake/resources/codes.yaml",
            "eventlake/cluster/code.py"} <= names  # fmt: skip
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    # Named by content: the same code gives the same file, so a driver adds it once.
    assert code_archive(tmp_path / "out") == archive


def test_a_taken_master_port_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cluster = SparkStandaloneCluster(port=port, ui_port=port + 1, data_dir=tmp_path)
        with pytest.raises(EventlakeError) as err:
            cluster.start()
    assert err.value.code == ErrorCode.CLUSTER_PORT_IN_USE
    assert f"port {port} on 127.0.0.1 (the Spark master port)" in str(err.value)
    assert not (tmp_path / "master.pid").exists()


def test_a_folder_keeps_the_shape_it_was_created_with(tmp_path: Path) -> None:
    (tmp_path / "cluster.json").write_text(
        '{"workers": 2, "cores": 1, "memory": "1g", "port": 7077, "ui_port": 8080}'
    )
    with pytest.raises(EventlakeError) as err:
        SparkStandaloneCluster(3, 1, "1g", data_dir=tmp_path).start()
    assert err.value.code == ErrorCode.CLUSTER_START_FAILED
    assert "pass --workers 2 --cores 1 --memory 1g" in str(err.value)


def test_the_master_web_ui_of_a_standalone_master_only() -> None:
    assert master_ui_url("spark://10.0.0.5:7077", 8080) == "http://10.0.0.5:8080"
    assert master_ui_url("spark://a:7077,b:7077", 8080) is None
    assert master_ui_url("yarn", 8080) is None
