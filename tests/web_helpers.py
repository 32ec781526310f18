"""A real web page on loopback, for the tools that fetch (http_fetch)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def allow(url: str) -> str:
    """tether.toml lines letting http_fetch reach ``url``'s loopback server: loopback is
    refused unless the owner lists it in ``[tools] fetch_allow``."""
    return f'[tools]\nfetch_allow = ["{url.split("/")[2]}"]\n'


@contextlib.contextmanager
def serve_page(body: bytes, content_type: str = "text/html; charset=utf-8") -> Iterator[str]:
    """Serve ``body`` at every path of a loopback HTTP server; yield the page's URL."""

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/page"
    finally:
        server.shutdown()
        server.server_close()
