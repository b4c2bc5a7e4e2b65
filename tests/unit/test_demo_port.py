"""The demo's port check binds as the sidecar's server does: a port another process listens on
is still refused, in one line (a port only in TIME-WAIT is not: tests/integration/test_demo.py)."""

from __future__ import annotations

import socket

import pytest

from mirrorlag.demo.runner import _check_port_free
from mirrorlag.errors import MirrorlagError


def test_a_port_in_use_is_refused_in_one_line():
    with socket.socket() as held:
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as http.server binds
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(MirrorlagError, match=rf"^demo HTTP port {port}: .*\(choose another with --port\)$"):
            _check_port_free(port)
    _check_port_free(port)  # closed: free again
