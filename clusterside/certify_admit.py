"""`python -m verify certify --admit` (the stack's Deployment `fabric-certifier-admission`): hold every new
boot of an IB node through the Kubernetes API, and have the held nodes certified as soon as they can run a
test.

Why the hold is put on here and not by the AgentPool: AKS refuses changes to pool-set taints through the
Kubernetes API, so a pool taint could never be lifted by the certifier (docs/fabric-certifier.md: the AKS
docs and issues, and e2e/aks_rules.py, which enforces that rule on the real control plane). A taint put on
through the API is the cluster's own and may be lifted.

The race, and why it is closed: a node joins with the kubelet's `node.kubernetes.io/not-ready` taint, and no
GPU or RDMA device is allocatable on it until the GPU Operator's and Network Operator's device plugins have
registered, minutes after it joins (the driver is installed first). The loop lists the IB nodes every
`--interval-seconds` (default 5, served from the API server's cache) and holds a new boot in one write, so
the hold is on long before a pod that asks for a GPU or an RDMA device can be bound there. A node that
already runs such a pod when it is first seen (the loop was down) is held all the same (NoSchedule: nothing
is evicted).

What it writes, and nothing else: the hold (fabric.HOLD_TAINT_KEY=uncertified, with `--mode taint`), the
state label and the record of the boot it held (certify.HELD_ANNOTATION), in one JSON Patch that `test`s
the resourceVersion; it lifts only its own hold from a boot that has already passed (it held the node while
a run certified it). A hold a person lifts stays lifted (the record says this boot was held once). When held
nodes can be tested (Ready, a GPU allocatable) it runs the recurring certification (clusterside/certify_recurring.py)
on them and up to three certified idle peers, one run at a time and at most once per `--retest-after-minutes`
for the same node.

With DRA GPUs (`--dra-gpus`: GB200, GB300, `rdmaMode: dra`) the device plugin is off and `nvidia.com/gpu`
never becomes allocatable: a node can run a test once the NVIDIA DRA driver has published its GPUs, a
resource.k8s.io/v1 ResourceSlice of driver core.dra.GPU_DRIVER for the node with at least one device. The
loop lists those slices each pass with a field selector on `spec.driver`, which the API serves for
ResourceSlices ("A field selector can be used to list only ResourceSlice objects with a certain driver
name": the resource.k8s.io/v1 ResourceSliceSpec reference); the certifier's ClusterRole then grants exactly
that `list` (components/fabric/certifier.py).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence, Set
from typing import Any

from clusterside import certify, certify_kube, certify_recurring, certify_serve, kube
from clusterside.kube import iso
from clusterside.kube_api import Api, ApiError
from core import choices, dra, fabric

DEFAULT_INTERVAL_SECONDS = 5.0
DEFAULT_RETEST_AFTER_MINUTES = 30.0
DEFAULT_PEER_WAIT_MINUTES = choices.DEFAULT_PEER_WAIT_MINUTES  # certifier.peerWaitMinutes (core/choices.py)


def _say(message: str) -> None:
    print(f"[verify certify --admit] {message}", file=sys.stderr, flush=True)


SLICES_PATH = "/apis/resource.k8s.io/v1/resourceslices"


def testable(node: Mapping[str, Any], gpu_nodes: Set[str] = frozenset()) -> bool:
    """Ready, and its GPUs usable: a GPU allocatable (the device plugin has registered) or, with DRA GPUs,
    published in a ResourceSlice (`gpu_nodes`, from gpu_slice_nodes): a test job can be scheduled."""
    ready = (kube.condition(node, "Ready") or {}).get("status") == "True"
    gpus = str((kube.get(node, "status", "allocatable") or {}).get(fabric.GPU_RESOURCE) or "0")
    return ready and ((gpus.isdigit() and int(gpus) > 0) or kube.name(node) in gpu_nodes)


def gpu_slice_nodes(api: Api) -> set[str]:
    """The nodes whose GPUs the NVIDIA DRA driver has published: a ResourceSlice of its driver for the node
    with at least one device (a slice may be empty while the driver starts)."""
    slices = kube.items(api.get(SLICES_PATH, fieldSelector=f"spec.driver={dra.GPU_DRIVER}"))
    return {str(kube.get(s, "spec", "nodeName")) for s in slices if kube.get(s, "spec", "driver") == dra.GPU_DRIVER
            and kube.get(s, "spec", "nodeName") and kube.get(s, "spec", "devices")}


def admit_pass(api: Api, writer: certify_kube.Writer, policy: certify.Policy, *, at: str,
               pool: str | None = None) -> list[dict]:
    """One pass: hold every new boot, lift our hold from a boot that passed while held. The IB nodes (of
    `pool`, with several) as read."""
    nodes = certify_kube.ib_nodes(api, pool)
    facts = [certify.facts(n) for n in nodes]
    for node, f in zip(nodes, facts, strict=True):
        if f.new_boot:
            why = (f"boot {f.boot_id} has not passed a fabric test" + (
                f" (the last certification was of boot {f.certified.get('boot_id')})" if f.certified else ""))
            try:
                writer.hold(node, policy.mode == "taint", at, why)
            except ApiError:  # said and kept; the next pass reads the node again
                continue
            writer.event(node, "Normal", "FabricHeld", "Hold", f"held until it passes a fabric test: {why}", at)
    lifted = certify.plan(facts, None, {}, policy, run_id="admission", at=at)
    reheld = tuple(d for d in lifted.decisions if d.action == certify.CERTIFY)
    if reheld:
        certify_kube.apply(writer, certify.Plan(reheld, None), nodes, policy, at=at)
    return nodes


def due(nodes: Sequence[Mapping[str, Any]], last_tested: Mapping[str, float], now: float,
        retest_after_seconds: float, gpu_nodes: Set[str] = frozenset()) -> list[str]:
    """Held (or not yet passed) nodes that can run a test and were not tested within `retest_after_seconds`
    (`gpu_nodes`: those whose DRA GPUs are published, testable())."""
    out = []
    for node in nodes:
        f = certify.facts(node)
        waiting = f.state == fabric.UNCERTIFIED or f.awaiting
        recent = now - last_tested.get(f.name, -1e18) <= retest_after_seconds
        if waiting and not f.cordoned and testable(node, gpu_nodes) and not recent:
            out.append(f.name)
    return out


def peer_waits(nodes: Sequence[Mapping[str, Any]], busy: Mapping[str, str],
               gpu_nodes: Set[str] = frozenset()) -> list[Mapping[str, Any]]:
    """Held (or not yet passed) nodes that could run a test now but have no peer: no other node of their pool
    (the nodes listed) is idle and able to take part, neither a certified one nor another joining. A run needs
    two nodes, so these wait; a node is never admitted untested (scale to zero: a node that comes back alone)."""
    usable = []
    for node in nodes:
        f = certify.facts(node)
        able = testable(node, gpu_nodes) and f.name not in busy and not f.cordoned and not f.problems
        if able and f.state != fabric.QUARANTINED:
            usable.append((node, f))
    if len(usable) >= 2:
        return []
    return [node for node, f in usable if f.state == fabric.UNCERTIFIED or f.awaiting]


def held_since(node: Mapping[str, Any], default: float) -> float:
    """When the admission loop held the boot the node runs (certify.HELD_ANNOTATION's `at`), else `default`."""
    annotations = kube.get(node, "metadata", "annotations") or {}
    try:
        held = json.loads(annotations.get(certify.HELD_ANNOTATION) or "{}")
        return kube.epoch(held["at"]) if held.get("boot_id") == certify.facts(node).boot_id else default
    except (ValueError, KeyError, TypeError):
        return default


class PeerWatch:
    """Says, once per boot, that a held node waits for a peer (a Normal Event), and once the bound
    (`--peer-wait-minutes`) has passed, that it is still waiting (a Warning Event): held all the while, never
    admitted untested, never left without a word."""

    def __init__(self, bound_minutes: float):
        self.bound_seconds = bound_minutes * 60
        self.said: set[tuple[str, str | None, str]] = set()

    def check(self, api: Api, writer: certify_kube.Writer, nodes: Sequence[Mapping[str, Any]], now: float,
              gpu_nodes: Set[str] = frozenset()) -> None:
        """`gpu_nodes`: with DRA GPUs, the nodes whose GPUs are published (gpu_slice_nodes)."""
        if not [n for n in nodes if testable(n, gpu_nodes) and certify.facts(n).awaiting]:
            return  # nothing held can run a test: no need to read the pods
        busy = certify_recurring.busy_nodes(kube.items(api.get("/api/v1/pods")))
        bound = f"{self.bound_seconds / 60:g}"
        for node in peer_waits(nodes, busy, gpu_nodes):
            key, waited = (kube.name(node), certify.facts(node).boot_id), now - held_since(node, now)
            if (*key, "waiting") not in self.said:
                self.said.add((*key, "waiting"))
                writer.event(node, "Normal", "FabricWaitingForPeer", "Hold",
                             f"held: no other node of its pool is idle to be tested with (certified or joining); it "
                             f"is tested as soon as one is, and reported if none is within {bound} min "
                             f"(certifier.peerWaitMinutes)", iso(now))
            if waited >= self.bound_seconds and (*key, "bound") not in self.said:
                self.said.add((*key, "bound"))
                writer.event(node, "Warning", "FabricNoPeer", "Hold",
                             f"no peer to be tested with for {waited / 60:.0f} min (certifier.peerWaitMinutes: "
                             f"{bound}): still held, never admitted untested; scale its pool to 2 or more nodes "
                             f"(a gang job's nodes come up together), or remove the node", iso(now))


def loop(api: Api, args: argparse.Namespace, policy: certify.Policy, run_recurring: Callable[[argparse.Namespace], int],
         *, sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.time,
         passes: int | None = None, health: certify_serve.Health | None = None) -> int:
    """Pass after pass (`passes`: a bound for tests; `--once` and `--dry-run`: one pass, no re-test). Each
    pass is handed to `health`, which the `--metrics-port` server answers from (clusterside/certify_serve.py)."""
    once = args.once or args.dry_run
    last_tested: dict[str, float] = {}
    peers = PeerWatch(getattr(args, "peer_wait_minutes", DEFAULT_PEER_WAIT_MINUTES))
    retest: threading.Thread | None = None
    history: dict | None = None
    history_read = -1e18
    done = 0
    while True:
        home = args.certifier_namespace or args.namespace
        writer = certify_kube.Writer(api, home, dry_run=args.dry_run)
        unread = False
        try:
            nodes = admit_pass(api, writer, policy, at=iso(clock()), pool=getattr(args, "pool", None))
        except ApiError as exc:  # the API is away: say it, try again next pass
            _say(f"could not read the IB nodes: {exc}")
            nodes, unread = [], True
        for line in writer.writes:
            _say(line)
        if health is not None:
            if args.history_configmap and clock() - history_read >= certify_serve.HISTORY_EVERY_SECONDS:
                try:
                    history, history_read = certify_kube.history_records(api, home, args.history_configmap), clock()
                except ApiError as exc:  # the metrics keep the last read
                    _say(f"could not read the history ConfigMap: {exc}")
            health.pass_ended(None if unread else nodes, history)
        if once:  # a pass that could not read the nodes did nothing: no result, exit 2 as for any API error
            return 2 if writer.failed or unread else 0
        gpu_nodes: set[str] = set()
        if args.dra_gpus and nodes:
            try:
                gpu_nodes = gpu_slice_nodes(api)
            except ApiError as exc:  # said; no DRA node is testable this pass
                _say(f"could not read the GPUs' ResourceSlices: {exc}")
        try:
            peers.check(api, writer, nodes, clock(), gpu_nodes)
        except ApiError as exc:  # the pods could not be read: say it, look again next pass
            _say(f"could not read the pods to find peers: {exc}")
        waiting = due(nodes, last_tested, clock(), args.retest_after_minutes * 60, gpu_nodes)
        if waiting and (retest is None or not retest.is_alive()):
            _say(f"held and ready for a test: {', '.join(waiting)}: starting a re-test")
            last_tested.update(dict.fromkeys(waiting, clock()))
            retest = threading.Thread(target=run_recurring, args=(recurring_args(args),), daemon=True)
            retest.start()
        done += 1
        if passes is not None and done >= passes:
            if retest is not None:
                retest.join()
            return 0
        sleep(args.interval_seconds)


def recurring_args(args: argparse.Namespace) -> argparse.Namespace:
    """The admission's own flags as a `--recurring` run's (the same policy, history and template)."""
    out = copy.copy(args)
    out.admit, out.recurring, out.job, out.nodes, out.wait_minutes = False, True, None, None, 0.0
    out.retest_by_admission = True  # its re-tests are named apart from the CronJob's (certify_recurring.retest_name)
    return out
