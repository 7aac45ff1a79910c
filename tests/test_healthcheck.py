"""The container healthcheck against real servers, and against nothing."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from powertrip.healthcheck import grpc_problem, http_problem, main
from powertrip.local import free_port
from powertrip.transport.servers import build_server


@pytest.fixture
def http_server() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/healthz" else 503)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_grpc_serving_and_gone() -> None:
    server, port = build_server("powertrip.test.v1.Nothing", {})
    server.start()
    try:
        assert grpc_problem(f"127.0.0.1:{port}", 3) is None
    finally:
        server.stop(None).wait()
    problem = grpc_problem(f"127.0.0.1:{port}", 1)
    assert problem is not None
    assert "UNAVAILABLE" in problem


def test_http_status(http_server: str) -> None:
    assert http_problem(f"{http_server}/healthz", 3) is None
    assert http_problem(f"{http_server}/other", 3) == f"{http_server}/other: HTTP 503"
    gone = http_problem(f"http://127.0.0.1:{free_port()}/healthz", 1)
    assert gone is not None
    assert "refused" in gone


def test_exit_status_is_the_verdict(http_server: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["http", f"{http_server}/healthz"]) == 0
    assert main(["grpc", f"127.0.0.1:{free_port()}", "--timeout-s", "0.5"]) == 1
    assert "unhealthy:" in capsys.readouterr().err


def test_runs_as_a_module_without_heavy_imports() -> None:
    code = (
        "import runpy, sys\n"
        "sys.argv = ['healthcheck', '--help']\n"
        "try:\n    runpy.run_module('powertrip.healthcheck', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print('torch' in sys.modules, 'typer' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().endswith("False False")
