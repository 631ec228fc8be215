"""What the fake API servers (tests/fake_kube.py, tests/fake_kube_store.py) share: an HTTP server on a
loopback port, served from a thread inside a `with` block, and the kubeconfig that points at it."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LoopbackServer:
    """Subclasses call `serve(Handler, token)` in their __init__; `with` starts and stops the server."""

    def serve(self, handler: type[BaseHTTPRequestHandler], token: str) -> None:
        self.token = token
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        # a short poll interval: shutdown() returns as soon as the loop sees it (the default is 0.5 s)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.01},
                                       daemon=True)

    def kubeconfig(self) -> str:
        """A kubeconfig as JSON (valid YAML too), so the certifier reads it with the standard library."""
        host, port = self.server.server_address[:2]
        return json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": f"http://{host}:{port}"}}],
            "users": [{"name": "fake", "user": {"token": self.token}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}]})

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
