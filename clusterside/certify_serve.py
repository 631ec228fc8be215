"""The admission loop's liveness and metrics, served over HTTP from its pod (`--metrics-port`), so that a
person on call and Prometheus see when the hold fails open (docs/certifier-runbook.md).

Why: the admission loop is what holds a new boot until it passes (clusterside/certify_admit.py). If it is
down or cannot reach the API server, new boots are never held and nothing else says so. A batch Job can
only push its metrics (certify_kube.push_metrics), but this loop runs all the time and can be scraped:

- `/healthz` (the liveness probe): 200 while passes end, whatever they found; 503 when no pass has ended
  for `stale_seconds` (the loop is wedged: the kubelet restarts the container);
- `/readyz` (the readiness probe): 200 while passes read the IB nodes; 503 when none has for
  `stale_seconds` (the API server refuses or cannot be reached: no new boot can be held). The Deployment
  then shows 0/1 ready, and kube-state-metrics' `kube_deployment_status_replicas_available` drops to 0;
- `/metrics` (Prometheus' text format 0.0.4): the last pass that read the nodes, each IB node's state
  as the loop last read it, how long each held node has been held, and from the history ConfigMap (read
  at most every `HISTORY_EVERY_SECONDS`) the last certification run and whether it tripped the breaker.
  In a stack of several IB pools each pool's loop runs with `--pool`, and each series carries `pool`.

The alert rules that read these are components/fabric/certifier_alerts.py's. Standard library only.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from clusterside import certify, kube
from core import fabric

DEFAULT_PORT = 9464  # the port the stack's admission Deployment serves on (components/fabric/certifier.py)
HISTORY_EVERY_SECONDS = 60.0  # the history ConfigMap grows with the pool: read it once a minute, not each pass
STALE_PASSES = 12  # passes without an end (or a read) after which the probes fail
MIN_STALE_SECONDS = 60.0
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def stale_seconds(interval_seconds: float) -> float:
    """How long the probes wait for a pass: STALE_PASSES passes, at least MIN_STALE_SECONDS."""
    return max(MIN_STALE_SECONDS, STALE_PASSES * interval_seconds)


def held_since(node: Mapping[str, Any]) -> float | None:
    """When the loop held the boot the node runs (certify.HELD_ANNOTATION), if it is held now; else None."""
    f = certify.facts(node)
    if not (f.state == fabric.UNCERTIFIED and f.awaiting) or f.held_boot != f.boot_id:
        return None
    try:
        record = json.loads((kube.get(node, "metadata", "annotations") or {}).get(certify.HELD_ANNOTATION) or "{}")
    except ValueError:
        return None
    return kube.epoch(record.get("at")) if isinstance(record, dict) else None


def last_run(history: Mapping[str, Sequence[Mapping[str, Any]]]) -> tuple[float | None, bool]:
    """(when the latest certification run recorded in the history ended, whether it tripped the breaker)."""
    records = [r for rs in history.values() for r in rs if kube.epoch(r.get("at")) is not None]
    if not records:
        return None, False
    latest = max(records, key=lambda r: kube.epoch(r.get("at")) or 0.0)
    same = [r for r in records if r.get("run") == latest.get("run")]
    return kube.epoch(latest.get("at")), any(r.get("breaker") for r in same)


def labels(pool: str | None, **pairs: str) -> str:
    """A series' label set in the text format: `pairs`, and with `pool` (a stack of several IB pools: the
    loop's `--pool`) `pool="<name>"` first, so each pool's series and alerts stay apart; '' for none."""
    pairs = {**({"pool": pool} if pool else {}), **pairs}
    return "{" + ",".join(f'{k}="{v}"' for k, v in pairs.items()) + "}" if pairs else ""


def metrics(nodes: Sequence[Mapping[str, Any]], now: float, last_read: float | None,
            history: Mapping[str, Sequence[Mapping[str, Any]]] | None, pool: str | None = None) -> str:
    """The text exposition: the names certify_kube.metrics_text pushes, where they mean the same; with
    `pool`, every series carries it (the alert rules of components/fabric/certifier_alerts.py select it)."""
    lines = ["# HELP aks_infiniband_admission_last_pass_timestamp_seconds The last pass that read the IB nodes.",
             "# TYPE aks_infiniband_admission_last_pass_timestamp_seconds gauge"]
    if last_read is not None:
        lines.append(f"aks_infiniband_admission_last_pass_timestamp_seconds{labels(pool)} {last_read:.0f}")
    lines.append("# TYPE aks_infiniband_fabric_node_state gauge")
    for n in nodes:
        f = certify.facts(n)
        lines.append(f"aks_infiniband_fabric_node_state{labels(pool, node=f.name, state=f.state)} 1")
    lines.append("# HELP aks_infiniband_fabric_node_held_seconds How long the boot a held node runs has been held.")
    lines.append("# TYPE aks_infiniband_fabric_node_held_seconds gauge")
    for n in nodes:
        since = held_since(n)
        if since is not None:
            held = max(0.0, now - since)
            lines.append(f"aks_infiniband_fabric_node_held_seconds{labels(pool, node=kube.name(n))} {held:.0f}")
    if history is not None:
        at, breaker = last_run(history)
        lines += ["# TYPE aks_infiniband_fabric_breaker_open gauge",
                  f"aks_infiniband_fabric_breaker_open{labels(pool)} {int(breaker)}"]
        if at is not None:
            lines += ["# TYPE aks_infiniband_fabric_last_run_timestamp_seconds gauge",
                      f"aks_infiniband_fabric_last_run_timestamp_seconds{labels(pool)} {at:.0f}"]
    return "\n".join(lines) + "\n"


class Health:
    """What the loop's passes leave for the server: when a pass last ended, last read the nodes, and the
    metrics text of that read. Thread-safe (the server answers from its own threads)."""

    def __init__(self, interval_seconds: float, clock, pool: str | None = None) -> None:
        self.stale = stale_seconds(interval_seconds)
        self.clock = clock
        self.pool = pool  # the loop's --pool: every series carries it
        self.lock = threading.Lock()
        self.started = clock()
        self.ended: float | None = None
        self.read: float | None = None
        self.text = metrics([], self.started, None, None, pool)

    def pass_ended(self, nodes: Sequence[Mapping[str, Any]] | None, history=None) -> None:
        """A pass ended; `nodes`: the IB nodes it read (None: it could not read them)."""
        now = self.clock()
        with self.lock:
            self.ended = now
            if nodes is not None:
                self.read = now
                self.text = metrics(nodes, now, now, history, self.pool)

    def probe(self, what: str) -> tuple[int, str]:
        now = self.clock()
        with self.lock:
            last = self.ended if what == "healthz" else self.read
        since = last if last is not None else self.started
        if now - since <= self.stale:
            return 200, "ok\n"
        doing = "no pass has ended" if what == "healthz" else "no pass has read the IB nodes"
        return 503, f"{doing} for {now - since:.0f} s (limit {self.stale:.0f} s): new boots are not being held\n"


def serve(health: Health, port: int, host: str = "") -> ThreadingHTTPServer:
    """Serve /healthz, /readyz and /metrics on `port` from a daemon thread; the server (to shut down)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # the probes every few seconds would drown the loop's own lines
            pass

        def do_GET(self):
            path = self.path.split("?", 1)[0]
            if path in ("/healthz", "/readyz"):
                code, body, ctype = *health.probe(path[1:]), "text/plain; charset=utf-8"
            elif path == "/metrics":
                with health.lock:
                    code, body, ctype = 200, health.text, CONTENT_TYPE
            else:
                code, body, ctype = 404, "not found\n", "text/plain; charset=utf-8"
            data = body.encode()
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server
