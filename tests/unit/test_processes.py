"""Ports eventlake picks for the processes it starts."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from eventlake.processes import HOST, ephemeral_ports, free_port, port_open, scoped_env


def _kernel_range() -> tuple[int, int]:
    """The kernel's ephemeral range, read here, not through eventlake."""
    low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    return int(low), int(high)


def test_the_ephemeral_range_is_the_kernels() -> None:
    low, high = _kernel_range()
    ports = ephemeral_ports()
    assert (ports.start, ports[-1]) == (low, high)


def test_a_free_port_is_outside_the_ephemeral_range_and_can_be_listened_on() -> None:
    low, high = _kernel_range()
    for _ in range(50):
        port = free_port()
        assert not low <= port <= high
        assert 10000 <= port <= 65535
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((HOST, port))
            s.listen()
            assert port_open(port)


def test_scoped_env_sets_a_variable_for_the_block_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LD_PRELOAD", "libother.so")
    with scoped_env("LD_PRELOAD", "libjemalloc.so.2 libother.so"):
        assert os.environ["LD_PRELOAD"] == "libjemalloc.so.2 libother.so"
    assert os.environ["LD_PRELOAD"] == "libother.so"
    monkeypatch.delenv("LD_PRELOAD")
    with scoped_env("LD_PRELOAD", "libjemalloc.so.2"):
        assert os.environ["LD_PRELOAD"] == "libjemalloc.so.2"
    assert "LD_PRELOAD" not in os.environ
    with scoped_env("LD_PRELOAD", None):
        assert "LD_PRELOAD" not in os.environ
