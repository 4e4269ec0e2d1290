"""A ``socketserver`` server (``http.server``'s among them) answering from a thread for the length of a ``with``."""

from __future__ import annotations

import contextlib
import socketserver
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def serving(server: socketserver.BaseServer, poll_interval_s: float = 0.05) -> Iterator[None]:
    """Serve ``server`` from a daemon thread; on leaving, stop it (within ``poll_interval_s``) and close its socket."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": poll_interval_s}, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
