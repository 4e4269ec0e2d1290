"""``LocalTriton.start``: which start-up failures it tries again, and which it reports at once.

A stand-in ``tritonserver`` (a Python script in the place of the bundled binary) fails its first start with the words
the real server prints, then serves ``/v2/health/ready``; no Triton runs here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tritonft import local_triton
from tritonft.local_triton import LocalTriton, ServerDist, TritonError, TritonRuntime

STANDIN = """\
#!{python}
import http.server, pathlib, sys
starts = pathlib.Path({starts!r})
starts.write_text(starts.read_text() + "x" if starts.exists() else "x")
if len(starts.read_text()) == 1:
    print({first_words!r}, flush=True)
    sys.exit(1)
port = int(next(arg for arg in sys.argv if arg.startswith("--http-port=")).split("=")[1])

class Ready(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/v2/health/ready" else 404)
        self.end_headers()

http.server.HTTPServer(("127.0.0.1", port), Ready).serve_forever()
"""


def standin_server(tmp_path: Path, first_words: str) -> tuple[LocalTriton, Path]:
    """A server whose first start prints ``first_words`` and exits 1, and whose later starts come up ready."""
    root = tmp_path / "tritonserver"
    binary = root / "bin" / "tritonserver"
    binary.parent.mkdir(parents=True)
    starts = tmp_path / "starts"
    binary.write_text(STANDIN.format(python=sys.executable, starts=str(starts), first_words=first_words))
    binary.chmod(0o755)
    runtime = TritonRuntime(dist=ServerDist(root, root / "lib"), backends=tmp_path, stub_env=tmp_path)
    server = LocalTriton(runtime, tmp_path, log_path=tmp_path / "tritonserver.log", ready_timeout=30)
    return server, starts


@pytest.fixture(autouse=True)
def no_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_triton, "START_RETRY_PAUSE_S", 0.0)


def test_a_stub_that_missed_the_health_handshake_during_warmup_is_started_again(tmp_path: Path) -> None:
    words = (
        "| t5-tp2-ft | 1 | UNAVAILABLE: Invalid argument: failed to run warmup sample 'tritonft-warmup': "
        "Stub process 't5-tp2-ft_0_0' is not healthy.; |"
    )
    server, starts = standin_server(tmp_path, words)
    with server:
        assert starts.read_text() == "xx"


def test_the_older_servers_abort_on_a_starved_stubs_mutex_is_started_again(tmp_path: Path) -> None:
    server, starts = standin_server(tmp_path, "terminate called after 'boost::interprocess::lock_exception'")
    with server:
        assert starts.read_text() == "xx"


def test_a_model_that_fails_to_load_is_reported_at_once_with_tritons_words(tmp_path: Path) -> None:
    words = (
        "| gpt2-tp1-ft | 1 | UNAVAILABLE: inference input data-type is 'UINT32', model expects 'INT64' |\n"
        "error: creating server: Internal - failed to load all models"
    )
    server, starts = standin_server(tmp_path, words)
    with pytest.raises(TritonError, match="model expects 'INT64'"):
        server.start()
    assert starts.read_text() == "x"
