"""`python -m e2e.volcano_standin`: the address of Volcano's webhook Service in the test tier, and a STAND-IN
for the webhook paths the pinned manifest registers that Volcano 1.10 does not serve.

The API server calls a webhook at its Service's ClusterIP and port (443). This process listens there, inside
the control plane's network namespace, with the serving certificate made for
`volcano-admission-service.volcano-system.svc`. A request for a path vc-webhook-manager serves is passed to it
(127.0.0.1:8443) unchanged, and its answer returned; a request for one of the `--admit` paths (the stack's
v1.15.1 manifest registers them with `failurePolicy: Fail`, and 1.10 has no handler for them: PodGroups,
HyperNodes, CronJobs) is ADMITTED without any check, so PodGroup writes succeed as they would with 1.15.1's
webhook, which checks things 1.10 cannot (docs/real-control-plane.md). Any other path is answered 404.
"""

from __future__ import annotations

import argparse
import http.client
import json
import ssl
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def admitted(review: dict) -> dict:
    """The AdmissionReview answer that admits `review`'s request unchanged (admission.k8s.io/v1)."""
    return {"apiVersion": review.get("apiVersion", "admission.k8s.io/v1"), "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": True}}


def serve(listen: str, cert: str, key: str, ca: str, upstream: str, served: set[str], admit: set[str]) -> None:
    host, port = upstream.rsplit(":", 1)
    client = ssl.create_default_context(cafile=ca)
    client.check_hostname = False  # the serving certificate names the Service; the CA check stays

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            path = self.path.split("?", 1)[0]
            if path in admit:
                self.answer(200, json.dumps(admitted(json.loads(body))).encode())
            elif path in served:
                conn = http.client.HTTPSConnection(host, int(port), context=client, timeout=30)
                try:
                    conn.request("POST", self.path, body, {"Content-Type": "application/json"})
                    got = conn.getresponse()
                    self.answer(got.status, got.read())
                finally:
                    conn.close()
            else:
                self.answer(404, f"no webhook at {path}\n".encode(), "text/plain")

        def answer(self, status: int, data: bytes, kind: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, fmt: str, *args) -> None:
            print(f"{self.address_string()} {fmt % args}", file=sys.stderr, flush=True)

    addr, lport = listen.rsplit(":", 1)
    server = ThreadingHTTPServer((addr, int(lport)), Handler)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    print(f"listening on {listen}: passing {sorted(served)} to {upstream}; admitting {sorted(admit)} unchecked "
          "(a stand-in)", file=sys.stderr, flush=True)
    server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m e2e.volcano_standin", description=__doc__.split("\n\n")[0])
    p.add_argument("--listen", required=True, help="the Service's ClusterIP:port")
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--ca", required=True, help="the CA of vc-webhook-manager's serving certificate")
    p.add_argument("--upstream", default="127.0.0.1:8443", help="vc-webhook-manager's address")
    p.add_argument("--served", required=True, help="comma-separated paths vc-webhook-manager serves")
    p.add_argument("--admit", required=True, help="comma-separated paths admitted unchecked (the stand-in)")
    a = p.parse_args(argv)
    serve(a.listen, a.cert, a.key, a.ca, a.upstream, set(a.served.split(",")), set(a.admit.split(",")) - {""})
    return 0


if __name__ == "__main__":
    sys.exit(main())
