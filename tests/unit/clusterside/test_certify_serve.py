"""The admission loop's liveness and metrics (clusterside/certify_serve.py, issue 52 items 7 and 8): the
probes fail when passes stop ending or stop reading the nodes (the hold fails open), and /metrics says
each node's state, how long a held node has been held, and the last run's breaker, over real HTTP."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from clusterside import certify, certify_admit, certify_cli, certify_serve
from clusterside.kube import iso
from clusterside.kube_api import connect
from core import fabric
from tests.fake_kube_store import FakeApi
from tests.unit.clusterside.test_certify import NS, name, node
from verify import __main__ as cli


def get(server, path: str) -> tuple[int, str]:
    host, port = server.server_address[:2]
    try:
        with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=5) as resp:  # noqa: S310 (loopback)
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


class Clock:
    def __init__(self, now: float = 1.8e9) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_the_probes_fail_when_passes_stop_ending_or_stop_reading_the_nodes():
    clock = Clock()
    health = certify_serve.Health(interval_seconds=5, clock=clock)
    server = certify_serve.serve(health, 0, "127.0.0.1")
    try:
        assert get(server, "/healthz")[0] == get(server, "/readyz")[0] == 200, "a loop just started"
        clock.now += 30
        health.pass_ended(None)  # the API server cannot be reached: the loop lives, it holds nothing
        clock.now += health.stale
        assert get(server, "/healthz")[0] == 200
        code, text = get(server, "/readyz")
        assert code == 503 and "no pass has read the IB nodes" in text and "not being held" in text
        clock.now += 31  # no pass ends at all: wedged
        assert get(server, "/healthz")[0] == 503
        health.pass_ended([node(0, None)])
        assert get(server, "/healthz")[0] == get(server, "/readyz")[0] == 200
    finally:
        server.shutdown()


def test_the_metrics_say_each_nodes_state_how_long_a_held_node_is_held_and_the_last_runs_breaker():
    now = 1.8e9
    held = node(0, boot="b", held_boot="b-0")  # held on the boot it runs
    held["metadata"]["annotations"][certify.HELD_ANNOTATION] = json.dumps({"boot_id": "b-0", "at": iso(now - 5400)})
    quarantined = node(1, fabric.QUARANTINED)
    history = {name(0): [{"at": iso(now - 7200), "run": "r1", "breaker": None}],
               name(1): [{"at": iso(now - 600), "run": "r2", "breaker": "circuit breaker: 2 of 4"}],
               name(2): [{"at": iso(now - 600), "run": "r2", "breaker": "circuit breaker: 2 of 4"}]}
    text = certify_serve.metrics([held, quarantined, node(2, None, certified=True)], now, now - 3, history)
    assert f'aks_infiniband_fabric_node_held_seconds{{node="{name(0)}"}} 5400' in text
    assert text.count("aks_infiniband_fabric_node_held_seconds{") == 1, "only the held boot"
    assert f'aks_infiniband_fabric_node_state{{node="{name(1)}",state="quarantined"}} 1' in text
    assert f"aks_infiniband_admission_last_pass_timestamp_seconds {now - 3:.0f}" in text
    assert "aks_infiniband_fabric_breaker_open 1" in text
    assert f"aks_infiniband_fabric_last_run_timestamp_seconds {now - 600:.0f}" in text
    calm = certify_serve.metrics([], now, now, {name(0): history[name(0)]})
    assert "aks_infiniband_fabric_breaker_open 0" in calm


def test_a_pools_loop_puts_its_pool_on_every_series():
    """Several IB pools, a loop each (`--pool`): every series carries `pool`, so each pool's alerts select their
    own loop (components/fabric/certifier_alerts.py); the one-pool loop's series are as they were."""
    now = 1.8e9
    held = node(0, boot="b", held_boot="b-0")
    held["metadata"]["annotations"][certify.HELD_ANNOTATION] = json.dumps({"boot_id": "b-0", "at": iso(now - 60)})
    history = {name(1): [{"at": iso(now), "run": "r", "breaker": None}]}
    text = certify_serve.metrics([held, node(1, fabric.QUARANTINED)], now, now, history, pool="h200")
    series = [line for line in text.splitlines() if not line.startswith("#")]
    assert len(series) == 6 and all(line.startswith("aks_infiniband_") for line in series)  # every kind
    assert all('{pool="h200"' in line for line in series), series
    assert f'aks_infiniband_fabric_node_state{{pool="h200",node="{name(1)}",state="quarantined"}} 1' in series
    assert "pool=" not in certify_serve.metrics([held], now, now, history)
    health = certify_serve.Health(5, Clock(now), pool="h200")  # the loop's own, from its --pool (certify_cli)
    health.pass_ended([held], history)
    assert health.text == certify_serve.metrics([held], now, now, history, pool="h200")


def test_the_running_loop_serves_what_its_passes_read(tmp_path, capsys):
    """The loop hands each pass to the server: the first pass holds the new boot, the second reads it held."""
    clock = Clock()
    with FakeApi(nodes=[node(0, None)]) as api:
        kubeconfig = tmp_path / "k.json"
        kubeconfig.write_text(api.kubeconfig())
        args = cli.build_parser().parse_args(["certify", "--admit", "--kubeconfig", str(kubeconfig), "--namespace",
                                              NS, "--metrics-port", "0"])
        health = certify_serve.Health(args.interval_seconds, clock)
        server = certify_serve.serve(health, 0, "127.0.0.1")
        try:
            code = certify_admit.loop(connect(str(kubeconfig)), args, certify.Policy(mode="taint"), certify_cli.run,
                                      sleep=lambda s: None, clock=clock, passes=2, health=health)
            status, text = get(server, "/metrics")
        finally:
            server.shutdown()
        capsys.readouterr()
    assert code == 0 and status == 200
    assert f'aks_infiniband_fabric_node_state{{node="{name(0)}",state="uncertified"}} 1' in text
    assert f'aks_infiniband_fabric_node_held_seconds{{node="{name(0)}"}} 0' in text
