"""mirrorlag.http.listener as written to where the server answers (issue 31): `:PORT` is every
IPv4 interface, `[::]:PORT` every interface (IPv4 too, on Linux), `[::1]:PORT` IPv6 loopback only."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import pytest

from mirrorlag.config import load_settings
from mirrorlag.exporters.http import ExpositionServer

BASE = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n"


def answers(host: str, port: int) -> bool:
    try:
        return urllib.request.urlopen(f"http://{host}:{port}/healthz", timeout=3).status == 200
    except (urllib.error.URLError, ConnectionError):
        return False


@pytest.mark.parametrize(("listener", "reachable", "unreachable"), [
    (":0", ["127.0.0.1", "127.0.0.2"], ["[::1]"]),
    ("[::]:0", ["127.0.0.1", "127.0.0.2", "[::1]"], []),
    ("[::1]:0", ["[::1]"], ["127.0.0.1"]),
    ("127.0.0.1:0", ["127.0.0.1"], ["127.0.0.2", "[::1]"]),
])
def test_listener_answers_where_it_says(tmp_path: Path, listener: str, reachable: list[str], unreachable: list[str]) -> None:
    config = tmp_path / "mm2.properties"
    config.write_text(BASE + f"mirrorlag.http.listener = {listener}\n")
    settings = load_settings([config])
    server = ExpositionServer(settings.http_host, settings.http_port)
    server.start()
    try:
        assert [h for h in reachable + unreachable if answers(h, server.port)] == reachable
    finally:
        server.stop()
