"""Volcano's own processes in the real-control-plane tier: vc-webhook-manager, vc-scheduler and
vc-controller-manager, at the version e2e/tools/volcano/go.mod pins (v1.10.0: that file says why it is not
the stack's v1.15.1), each as the ServiceAccount the stack's manifest gives its Deployment.

They stand in for the pods of the manifest's Deployments, which cannot run here (kwok runs no containers: it
only reports the pods Running). The manifest itself is the stack's (the render's `volcano-manifest`
ConfigGroup, the pinned v1.15.1 file as configured by components/platform/volcano.py), applied server-side
with the field manager the apply tier uses (e2e/apply.py), so a later apply of the stack changes nothing.
What differs from a real install, and why (docs/real-control-plane.md, "Volcano"):
- the scheduler reads the stack's scheduler configuration less the plugins 1.10 does not have (DROPPED);
- the webhook Service's address is served by e2e/volcano_standin.py: it passes the paths 1.10 serves to
  vc-webhook-manager and ADMITS, unchecked, the paths the manifest registers that 1.10 has no handler for
  (PodGroup, HyperNode and CronJob validation); the manifest's webhook configurations are not edited, but
  their caBundle is set, as 1.15.1's webhook manager sets it for every path it serves;
- the webhook's CA and serving certificate are made here at start-up (the manifest's init Job makes them
  on AKS; here kwok only reports its pod Succeeded).
"""

from __future__ import annotations

import base64
import json
import re
import socket
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from e2e import cluster, kubelet
from e2e.cluster import ROOT, ClusterError, Plane, kubeconfig, say, wait

MODULE = ROOT / "e2e" / "tools" / "volcano" / "go.mod"
GROUP = "volcano-manifest"  # the ConfigGroup of components/platform/volcano.py in the render
NAMESPACE, SERVICE = "volcano-system", "volcano-admission-service"
FIELD_MANAGER = "pulumi-e2e"  # e2e/apply.py's: the stack's later apply finds every field its own
# The webhook paths the built version has handlers for (pkg/webhooks/admission/*/ of volcano.sh/volcano v1.10.0).
SERVED_PATHS = frozenset({"/jobs/mutate", "/jobs/validate", "/podgroups/mutate", "/queues/mutate",
                            "/queues/validate", "/pods/mutate", "/pods/validate"})
# Scheduler plugins of the stack's configuration that 1.10 does not have (it came in 1.12).
DROPPED = ("network-topology-aware",)
LOCAL_WEBHOOK = ("127.0.0.1", 8443)
STAND_IN = "volcano-admission-stand-in"
# Each program, the manifest's ServiceAccount it runs as, its health address.
ACCOUNTS = {"vc-webhook-manager": "volcano-admission", "vc-scheduler": "volcano-scheduler",
            "vc-controller-manager": "volcano-controllers"}
HEALTH = {"vc-controller-manager": "127.0.0.1:11251", "vc-scheduler": "127.0.0.1:11252",
          "vc-webhook-manager": "127.0.0.1:11253"}
PROCESSES = ("vc-webhook-manager", STAND_IN, "vc-scheduler", "vc-controller-manager")
# The `app` label of the pods of the manifest's Deployments, which the programs stand in for. Where the stack
# applies the manifest itself, kwok holds them Pending (e2e/kwok-stage-engine-day0.yaml) until Volcano runs.
DEPLOYMENT_APPS = ("volcano-admission", "volcano-scheduler", "volcano-controller")
DEFAULT_QUEUE = "default"


def version() -> str:
    """The volcano.sh/volcano version the tier builds (its go.mod's require line)."""
    found = re.search(r"^require volcano\.sh/volcano (v\S+)$", MODULE.read_text(), re.MULTILINE)
    if not found:
        raise ClusterError(f"{MODULE}: no `require volcano.sh/volcano vX.Y.Z` line")
    return found.group(1)


def manifest(rendering) -> list[dict[str, Any]]:
    """The objects of the render's Volcano ConfigGroup, in its order, as the stack applies them."""
    from offline import config_groups
    return [o for r in rendering.resources if r.name == GROUP for o in config_groups.objects(r)]


def webhook_paths(objects: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, str]]:
    """Each path the manifest's webhook configurations call: (the configuration's kind, its name)."""
    out = {}
    for o in objects:
        if o["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            for hook in o["webhooks"]:
                out[hook["clientConfig"]["service"]["path"]] = (o["kind"], o["metadata"]["name"])
    return out


def scheduler_conf(objects: Sequence[Mapping[str, Any]]) -> str:
    """The stack's scheduler configuration (its ConfigMap) less the DROPPED plugins."""
    cm = next(o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "volcano-scheduler-configmap")
    conf = yaml.safe_load(cm["data"]["volcano-scheduler.conf"])
    for tier in conf.get("tiers") or []:
        tier["plugins"] = [p for p in tier.get("plugins") or [] if p.get("name") not in DROPPED]
    return yaml.safe_dump(conf, sort_keys=False)


def _data(objects: Sequence[Mapping[str, Any]], configmap: str, key: str) -> str:
    return next(o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == configmap)["data"][key]


def _listed(objects: Sequence[Mapping[str, Any]]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)})


def apply_manifest(plane: Plane, objects: Sequence[Mapping[str, Any]]) -> None:
    """Every object of the manifest, server-side, as the stack applies them; then its CRDs Established."""
    plane.kubectl("apply", "--server-side", "--force-conflicts", f"--field-manager={FIELD_MANAGER}", "-f", "-",
                  input=_listed(objects))
    wait_established(plane, objects)


def wait_applied(plane: Plane, objects: Sequence[Mapping[str, Any]], timeout: float) -> None:
    """Until every object of the manifest exists (applied by someone else: the stack's `pulumi up`), then its
    CRDs Established."""
    wait(f"the {len(objects)} objects of Volcano's manifest (applied by the stack)", lambda: plane.kubectl(
        "get", "-f", "-", "-o", "name", input=_listed(objects), check=False).returncode == 0, timeout)
    wait_established(plane, objects)


def wait_established(plane: Plane, objects: Sequence[Mapping[str, Any]]) -> None:
    crds = {o["metadata"]["name"] for o in objects if o["kind"] == "CustomResourceDefinition"}

    def established() -> bool:
        done = plane.kubectl("get", "crd", "-o", "json", check=False)
        return done.returncode == 0 and crds <= {
            c["metadata"]["name"] for c in json.loads(done.stdout)["items"]
            if any(k["type"] == "Established" and k["status"] == "True"
                   for k in (c.get("status") or {}).get("conditions") or [])}
    wait(f"Volcano's {len(crds)} CRDs Established", established, 60)


def webhook_pki(state: Path, service_ip: str) -> Path:
    """A CA and the webhook's serving certificate for its Service, made afresh at each start."""
    d = state / "volcano-pki"
    d.mkdir(parents=True, exist_ok=True)
    cluster._openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / "ca.key"),
                     "-out", str(d / "ca.crt"), "-days", "30", "-subj", "/CN=volcano-admission-e2e-ca")
    host = f"{SERVICE}.{NAMESPACE}.svc"
    cluster._cert(d, "webhook", f"/CN={host}", server=True, sans=[
        f"DNS:{host}", f"DNS:{SERVICE}.{NAMESPACE}", f"DNS:{SERVICE}", f"IP:{service_ip}", "IP:127.0.0.1"])
    return d


def account_kubeconfig(plane: Plane, program: str) -> Path:
    """A kubeconfig with a TokenRequest token of the program's ServiceAccount (not the admin's)."""
    token = plane.kubectl("create", "token", ACCOUNTS[program], "-n", NAMESPACE, "--duration=24h").stdout.strip()
    return kubeconfig(plane.state / f"{program}.kubeconfig", plane.state / "pki", ACCOUNTS[program],
                      {"token": token})


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def set_ca_bundle(plane: Plane, kind: str, name: str, ca: bytes) -> None:
    """The configuration's caBundle, set as Volcano's webhook manager sets it (get, then update, as its
    ServiceAccount: its ClusterRole allows update, not patch); nothing else of the object changes."""
    obj = json.loads(plane.kubectl("get", kind.lower(), name, "-o", "json").stdout)
    for hook in obj["webhooks"]:
        hook["clientConfig"]["caBundle"] = base64.b64encode(ca).decode()
    account = f"system:serviceaccount:{NAMESPACE}:{ACCOUNTS['vc-webhook-manager']}"
    plane.kubectl("replace", "-f", "-", input=json.dumps(obj), as_=account)


def _healthy(address: str) -> bool:
    return cluster._http_ok(f"http://{address}/healthz")


def wait_open(plane: Plane, queue: str, why: str) -> None:
    """Until Volcano's queue controller has opened `queue`: its webhook refuses a Job in a queue not Open."""
    wait(f"Volcano's `{queue}` queue Open ({why})", lambda: plane.kubectl(
        "get", "queues.scheduling.volcano.sh", queue, "-o", "jsonpath={.status.state}", check=False
    ).stdout == "Open", 60, plane.logs / "vc-controller-manager.log")


def report_running(plane: Plane, app: str) -> None:
    """The pods of the manifest's Deployment `app` reported Running and Ready, as a kubelet reports them once
    their container has started (the manifest gives them no readiness probe)."""
    def held() -> list[dict[str, Any]]:
        listed = plane.kubectl("get", "pods", "-n", NAMESPACE, "-l", f"app={app}", "-o", "json").stdout
        return json.loads(listed)["items"]
    wait(f"the pod of Volcano's {app} Deployment (held Pending by kwok)", lambda: bool(held()), 60)
    for pod in held():
        kubelet.report(plane, pod)


def start(plane: Plane, objects: Sequence[Mapping[str, Any]], applied_by_stack: float = 0) -> None:
    """The manifest applied, then the webhook (and its stand-in), the scheduler and the controller manager.
    `applied_by_stack`: seconds to wait for the stack's own apply of the manifest instead (a `pulumi up`
    running beside); once Volcano runs, the pods of its Deployments are reported Running (report_running)."""
    if not objects:  # the Azure half of a split stack applies no Volcano
        say(f"Volcano not started: the render has no {GROUP} ConfigGroup")
        return
    if applied_by_stack:
        wait_applied(plane, objects, applied_by_stack)
    else:
        apply_manifest(plane, objects)
    service_ip = plane.kubectl("get", "service", SERVICE, "-n", NAMESPACE, "-o", "jsonpath={.spec.clusterIP}").stdout
    port = next(o for o in objects if o["kind"] == "Service" and o["metadata"]["name"] == SERVICE)["spec"]["ports"][0]
    d = webhook_pki(plane.state, service_ip)
    conf = plane.state / "volcano"
    conf.mkdir(exist_ok=True)
    admission_conf = _data(objects, "volcano-admission-configmap", "volcano-admission.conf")
    (conf / "volcano-admission.conf").write_text(admission_conf)
    (conf / "volcano-scheduler.conf").write_text(scheduler_conf(objects))
    paths = webhook_paths(objects)
    served = sorted(p for p in paths if p in SERVED_PATHS)
    admit = sorted(p for p in paths if p not in SERVED_PATHS)
    host, local_port = LOCAL_WEBHOOK
    # -v=2 keeps every error and warning (a failed bind, create or admission) and the plugins' steps; -v=3
    # adds a line per scheduling cycle and per admission (about 1-3 MB per program per start)
    common = ["--logtostderr", "-v=2"]
    plane.start("vc-webhook-manager", [
        f"--kubeconfig={account_kubeconfig(plane, 'vc-webhook-manager')}", f"--listen-address={host}",
        f"--port={local_port}", f"--tls-cert-file={d / 'webhook.crt'}", f"--tls-private-key-file={d / 'webhook.key'}",
        f"--ca-cert-file={d / 'ca.crt'}", f"--webhook-namespace={NAMESPACE}", f"--webhook-service-name={SERVICE}",
        f"--enabled-admission={','.join(served)}", f"--admission-conf={conf / 'volcano-admission.conf'}",
        "--enable-healthz=true", f"--healthz-address={HEALTH['vc-webhook-manager']}", *common])
    log = plane.logs / "vc-webhook-manager.log"
    wait(f"vc-webhook-manager listening on {host}:{local_port}", cluster._alive_or_fail(
        plane, "vc-webhook-manager", lambda: _listening(host, local_port)), 120, log)
    plane.start(STAND_IN, [
        "-m", "e2e.volcano_standin", f"--listen={service_ip}:{port['port']}", f"--cert={d / 'webhook.crt'}",
        f"--key={d / 'webhook.key'}", f"--ca={d / 'ca.crt'}", f"--upstream={host}:{local_port}",
        f"--served={','.join(served)}", f"--admit={','.join(admit)}"], program=sys.executable)
    ca = (d / "ca.crt").read_bytes()
    for path in admit:  # vc-webhook-manager has set the caBundle of the configurations of `served`
        set_ca_bundle(plane, *paths[path], ca)
    probe = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "e2e-probe"},
             "spec": {"weight": 1}}
    wait(f"the API server to reach Volcano's webhook at {service_ip}:{port['port']} (a dry-run Queue admitted)",
         cluster._alive_or_fail(plane, STAND_IN, lambda: plane.kubectl(
             "create", "--dry-run=server", "-f", "-", input=json.dumps(probe), check=False).returncode == 0),
         60, plane.logs / f"{STAND_IN}.log")
    plane.start("vc-scheduler", [
        f"--kubeconfig={account_kubeconfig(plane, 'vc-scheduler')}",
        f"--scheduler-conf={conf / 'volcano-scheduler.conf'}",
        "--leader-elect=false", "--enable-healthz=true", f"--healthz-address={HEALTH['vc-scheduler']}",
        "--listen-address=127.0.0.1:8080", "--schedule-period=1s", f"--default-queue={DEFAULT_QUEUE}", *common])
    plane.start("vc-controller-manager", [
        f"--kubeconfig={account_kubeconfig(plane, 'vc-controller-manager')}", "--leader-elect=false",
        "--enable-healthz=true", f"--healthz-address={HEALTH['vc-controller-manager']}", "--worker-threads=3", *common])
    for name in ("vc-scheduler", "vc-controller-manager"):
        wait(f"{name} /healthz", cluster._alive_or_fail(plane, name, lambda n=name: _healthy(HEALTH[n])), 120,
             plane.logs / f"{name}.log")
    wait_open(plane, DEFAULT_QUEUE, "created by vc-scheduler")
    for app in DEPLOYMENT_APPS if applied_by_stack else ():
        report_running(plane, app)
    say(f"Volcano {version()} runs (the stack's manifest pins v1.15.1): webhook {', '.join(served)} at "
        f"{service_ip}:{port['port']}; admitted unchecked by the stand-in: {', '.join(admit) or 'none'}")
