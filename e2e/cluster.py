"""`python -m e2e.cluster up [--stack NAME] | down | status`: a real Kubernetes control plane on loopback.

`up` builds (or finds in the cache) the pinned programs (e2e/tools/build.sh), makes a network namespace
with only loopback, and inside it starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
kwok. The service, pod and node ranges are routed to loopback there, so a connection the API server makes
to a Service or pod address (a webhook, an aggregated API) reaches a local listener or is refused at once,
and nothing can leave the machine. It then creates AKS's node rules (e2e/aks_rules.py) and checks that
they deny, the nodes of the stack's pools as AKS creates them (e2e/pools.py), and Volcano (e2e/volcano.py).
It writes an admin kubeconfig to $E2E_STATE/kubeconfig and prints, as its last line, the prefix that runs a
command beside it. `down` ends every process it started, by the process ids it wrote, and removes the
namespace its own `up` made (recorded in $E2E_STATE/netns), no other. $E2E_NETNS names the namespace
(aksib-e2e), $E2E_STATE the folder of its state (build/e2e): docs/real-control-plane.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATE = Path(os.environ.get("E2E_STATE", ROOT / "build" / "e2e"))
NETNS = os.environ.get("E2E_NETNS", "aksib-e2e")
BUILD_SCRIPT = ROOT / "e2e" / "tools" / "build.sh"
KUBECONFIG = STATE / "kubeconfig"
# AKS's defaults for Azure CNI Overlay (the stack's networkProfile): services 10.0.0.0/16, pods
# 10.244.0.0/16; nodes in 10.224.0.0/16. Inside the namespace each range is a `local` route on loopback.
SERVICE_CIDR, POD_CIDR, NODE_CIDR = "10.0.0.0/16", "10.244.0.0/16", "10.224.0.0/16"
API_ADVERTISE = "10.224.0.1"  # the `kubernetes` Service's endpoint (a loopback address cannot be one)
NODE_IP, KUBELET_PORT = "10.224.0.4", 10250  # every kwok node's address; kwok serves their logs there
API_PORT, ETCD_PORT = 6443, 2379
SERVER = f"https://127.0.0.1:{API_PORT}"
# Admission plugins beyond 1.35's defaults (PodSecurity, ServiceAccount, webhooks, policies... are on by
# default) that AKS runs: the AKS FAQ, "Which Kubernetes admission controllers does AKS support?".
AKS_ADMISSION = "NodeRestriction,ExtendedResourceToleration,PodNodeSelector,PodTolerationRestriction"
PROCESSES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
# Volcano's programs (e2e/volcano.py starts them after the nodes; the stand-in is Python, not built).
VOLCANO = ("vc-webhook-manager", "vc-scheduler", "vc-controller-manager")


class ClusterError(RuntimeError):
    """One line saying what failed and where its log is."""


def say(message: str) -> None:
    print(f"[e2e] {message}", file=sys.stderr, flush=True)


def prefix() -> list[str]:
    """What runs a command beside the control plane."""
    return ["ip", "netns", "exec", NETNS]


def wait(what: str, check: Callable[[], bool], timeout: float, log: Path | None = None, every: float = 0.5) -> None:
    """Poll `check` until it is true; ClusterError naming `what` (and the log to read) after `timeout` s."""
    start = time.monotonic()
    say(f"waiting for {what} (at most {timeout:.0f}s)")
    while not check():
        if time.monotonic() - start > timeout:
            where = f"; its log: {log}" if log else ""
            raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}{where}")
        time.sleep(every)
    say(f"{what}: ready in {time.monotonic() - start:.1f}s")


# --- the tools ---------------------------------------------------------------------------------------
def tools(budget: int = 0) -> Path:
    """The folder of the built programs (built first when the cache has none for these pins)."""
    argv = ["bash", str(BUILD_SCRIPT), *(["--budget", str(budget)] if budget else [])]
    out = subprocess.run(argv, check=True, stdout=subprocess.PIPE, text=True).stdout.strip().splitlines()
    return Path(out[-1])


# The Pulumi CLI's own stack-file reading (e2e/tools/pulumi/main.go), for the render's parity test.
PULUMI_CONFIG = "pulumi-config"


def missing_tools(bin_dir: Path) -> list[str]:
    return [p for p in (*PROCESSES, *VOLCANO, "kubectl", PULUMI_CONFIG) if not (bin_dir / p).is_file()]


# --- the network namespace ---------------------------------------------------------------------------
def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


def netns_exists() -> bool:
    return NETNS in _ip("netns", "list", check=False).stdout.split()


# The namespace this checkout's cluster-up (or e2e run) made, recorded in its state: down removes only that.
NETNS_RECORD = STATE / "netns"


def recorded_netns() -> bool:
    return NETNS_RECORD.is_file() and NETNS_RECORD.read_text().strip() == NETNS


def netns_up() -> None:
    """A namespace with loopback only; the service, pod and node ranges are local addresses on it. A
    namespace made here is recorded (NETNS_RECORD), so that `down` removes it and no other."""
    if not netns_exists():
        _ip("netns", "add", NETNS)
        NETNS_RECORD.parent.mkdir(parents=True, exist_ok=True)
        NETNS_RECORD.write_text(NETNS + "\n")
    _ip("-n", NETNS, "link", "set", "lo", "up")
    for cidr in (SERVICE_CIDR, POD_CIDR, NODE_CIDR):
        _ip("-n", NETNS, "route", "replace", "local", cidr, "dev", "lo")
    links = _ip("-n", NETNS, "-o", "link", "show").stdout
    if [line.split(":")[1].strip() for line in links.splitlines()] != ["lo"]:
        raise ClusterError(f"network namespace {NETNS} has links besides lo: {links}")


def in_netns() -> bool:
    """Whether this process runs in the control plane's namespace (its only link is lo)."""
    try:
        own = os.stat("/proc/self/ns/net").st_ino
        return own == os.stat(f"/run/netns/{NETNS}").st_ino
    except OSError:
        return False


# --- certificates --------------------------------------------------------------------------------------
def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _cert(pki: Path, name: str, subject: str, *, sans: Sequence[str] = (), server: bool = False) -> None:
    key, csr, crt, ext = (pki / f"{name}{s}" for s in (".key", ".csr", ".crt", ".ext"))
    _openssl("genrsa", "-out", str(key), "2048")
    _openssl("req", "-new", "-key", str(key), "-subj", subject, "-out", str(csr))
    usage = "serverAuth" if server else "clientAuth"
    ext.write_text(f"basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
                   f"extendedKeyUsage={usage}\n" + (f"subjectAltName={','.join(sans)}\n" if sans else ""))
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(pki / "ca.crt"), "-CAkey", str(pki / "ca.key"),
             "-CAcreateserial", "-days", "30", "-sha256", "-extfile", str(ext), "-out", str(crt))


# The client identities: each control-plane component as kubeadm names it, so the bootstrap RBAC
# roles apply; kwok plays every kubelet and AKS's node provisioning (an admin).
CLIENTS = {"admin": "/O=system:masters/CN=kubernetes-admin",
           "kube-controller-manager": "/CN=system:kube-controller-manager",
           "kube-scheduler": "/CN=system:kube-scheduler",
           "kwok": "/O=system:masters/CN=kwok-controller",
           "apiserver-kubelet-client": "/O=system:masters/CN=kube-apiserver-kubelet-client"}


def pki(state: Path) -> Path:
    d = state / "pki"
    if (d / "done").exists():
        return d
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / "ca.key"), "-out", str(d / "ca.crt"),
             "-days", "30", "-subj", "/CN=aks-infiniband-e2e-ca")
    _cert(d, "apiserver", "/CN=kube-apiserver", server=True, sans=[
        "IP:127.0.0.1", f"IP:{API_ADVERTISE}", "IP:10.0.0.1", "DNS:localhost", "DNS:kubernetes",
        "DNS:kubernetes.default", "DNS:kubernetes.default.svc", "DNS:kubernetes.default.svc.cluster.local"])
    _cert(d, "kubelet", "/CN=kwok-kubelet", server=True, sans=[f"IP:{NODE_IP}", "IP:127.0.0.1"])
    for name, subject in CLIENTS.items():
        _cert(d, name, subject)
    _openssl("genrsa", "-out", str(d / "sa.key"), "2048")
    _openssl("rsa", "-in", str(d / "sa.key"), "-pubout", "-out", str(d / "sa.pub"))
    (d / "done").touch()
    return d


def kubeconfig(path: Path, pki_dir: Path, client: str, user: dict | None = None) -> Path:
    """A kubeconfig (JSON is YAML) for one client: its certificate, or the credentials in `user`."""
    user = user or {"client-certificate": str(pki_dir / f"{client}.crt"), "client-key": str(pki_dir / f"{client}.key")}
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "e2e",
           "clusters": [{"name": "e2e", "cluster": {"server": SERVER,
                                                    "certificate-authority": str(pki_dir / "ca.crt")}}],
           "users": [{"name": client, "user": user}],
           "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": client}}]}
    path.write_text(json.dumps(doc, indent=2))
    return path


# --- processes -----------------------------------------------------------------------------------------
@dataclass
class Plane:
    state: Path
    bin: Path

    @property
    def pids(self) -> Path:
        return self.state / "pids"

    @property
    def logs(self) -> Path:
        return self.state / "logs"

    def start(self, name: str, argv: Sequence[str], program: str | None = None) -> None:
        """The built program `name` (or `program`) with `argv`, in its own session; its id in pids/."""
        self.pids.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        with open(self.logs / f"{name}.log", "ab") as log:
            proc = subprocess.Popen([program or str(self.bin / name), *argv], stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True, cwd=ROOT)
        (self.pids / f"{name}.pid").write_text(str(proc.pid))
        say(f"started {name} (pid {proc.pid}; log {self.logs / f'{name}.log'})")

    def alive(self, name: str) -> bool:
        pid = read_pid(self.pids / f"{name}.pid")
        return pid is not None and pid_alive(pid)

    def kubectl(self, *args: str, input: str | None = None, check: bool = True, as_: str | None = None
                ) -> subprocess.CompletedProcess:
        argv = [str(self.bin / "kubectl"), f"--kubeconfig={KUBECONFIG}", *(["--as", as_] if as_ else []), *args]
        done = subprocess.run(argv, input=input, capture_output=True, text=True)
        if check and done.returncode:
            raise ClusterError(f"kubectl {' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")
        return done


def read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie (ended, not reaped) counts as ended
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _http_ok(url: str, context=None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as r:  # noqa: S310 (loopback)
            return r.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _tls(pki_dir: Path):
    import ssl
    ctx = ssl.create_default_context(cafile=str(pki_dir / "ca.crt"))
    ctx.load_cert_chain(str(pki_dir / "admin.crt"), str(pki_dir / "admin.key"))
    return ctx


def _alive_or_fail(plane: Plane, name: str, check: Callable[[], bool]) -> Callable[[], bool]:
    def probe() -> bool:
        if not plane.alive(name):
            tail = (plane.logs / f"{name}.log").read_text(errors="replace").splitlines()[-15:]
            raise ClusterError(f"{name} exited; the end of its log ({plane.logs / f'{name}.log'}):\n  "
                               + "\n  ".join(tail))
        return check()
    return probe


def start_control_plane(plane: Plane, stages: Sequence[Path] = ()) -> None:
    """`stages`: kwok Stage files of a scenario's own stand-ins, after the harness's."""
    d = pki(plane.state)
    for client in CLIENTS:
        kubeconfig(plane.state / f"{client}.kubeconfig", d, client)
    shutil.copyfile(plane.state / "admin.kubeconfig", KUBECONFIG)
    plane.start("etcd", [
        "--name=e2e", f"--data-dir={plane.state / 'etcd'}", f"--listen-client-urls=http://127.0.0.1:{ETCD_PORT}",
        f"--advertise-client-urls=http://127.0.0.1:{ETCD_PORT}", "--listen-peer-urls=http://127.0.0.1:2380",
        "--initial-advertise-peer-urls=http://127.0.0.1:2380", "--initial-cluster=e2e=http://127.0.0.1:2380",
        "--unsafe-no-fsync", "--log-level=warn"])
    wait("etcd /health", _alive_or_fail(plane, "etcd", lambda: _http_ok(f"http://127.0.0.1:{ETCD_PORT}/health")),
         60, plane.logs / "etcd.log")
    plane.start("kube-apiserver", [
        f"--etcd-servers=http://127.0.0.1:{ETCD_PORT}", "--bind-address=0.0.0.0", f"--secure-port={API_PORT}",
        f"--advertise-address={API_ADVERTISE}", f"--service-cluster-ip-range={SERVICE_CIDR}",
        f"--tls-cert-file={d / 'apiserver.crt'}", f"--tls-private-key-file={d / 'apiserver.key'}",
        f"--client-ca-file={d / 'ca.crt'}", "--authorization-mode=Node,RBAC", "--allow-privileged=true",
        f"--enable-admission-plugins={AKS_ADMISSION}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={d / 'sa.pub'}", f"--service-account-signing-key-file={d / 'sa.key'}",
        f"--kubelet-client-certificate={d / 'apiserver-kubelet-client.crt'}",
        f"--kubelet-client-key={d / 'apiserver-kubelet-client.key'}",
        "--kubelet-preferred-address-types=InternalIP", "--profiling=false", "--v=1"])
    ctx = _tls(d)
    wait("kube-apiserver /readyz", _alive_or_fail(plane, "kube-apiserver", lambda: _http_ok(f"{SERVER}/readyz", ctx)),
         180, plane.logs / "kube-apiserver.log")
    plane.start("kube-controller-manager", [
        f"--kubeconfig={plane.state / 'kube-controller-manager.kubeconfig'}", "--leader-elect=false",
        "--bind-address=127.0.0.1", "--use-service-account-credentials=true",
        f"--service-account-private-key-file={d / 'sa.key'}", f"--root-ca-file={d / 'ca.crt'}",
        f"--cluster-signing-cert-file={d / 'ca.crt'}", f"--cluster-signing-key-file={d / 'ca.key'}",
        f"--cluster-cidr={POD_CIDR}", f"--service-cluster-ip-range={SERVICE_CIDR}", "--profiling=false"])
    plane.start("kube-scheduler", [f"--kubeconfig={plane.state / 'kube-scheduler.kubeconfig'}",
                                   "--leader-elect=false", "--bind-address=127.0.0.1", "--profiling=false"])
    # kwok's CRDs first: it watches Logs and ClusterLogs at start.
    plane.kubectl("apply", "--server-side", "-f", str(plane.bin / "kwok-assets" / "crds"))
    config = plane.state / "kwok.yaml"
    # kwok's "fast" stages, then the harness's stand-in for the fabric test's launcher and workers
    stages = [*sorted((plane.bin / "kwok-assets" / "stages").glob("*.yaml")), ROOT / "e2e" / "kwok-stage-mpirun.yaml",
              *stages]
    config.write_text("\n---\n".join([
        # kwok's own defaults (kustomize/kwok/kwok.yaml of the module), with only the CRDs used here
        "apiVersion: config.kwok.x-k8s.io/v1alpha1\nkind: KwokConfiguration\noptions:\n"
        "  enableCRDs: [Logs, ClusterLogs]\n  enableDebuggingHandlers: true\n"
        "  nodeLeaseParallelism: 4\n  podPlayStageParallelism: 4\n"
        "  nodePlayStageParallelism: 4\n  nodeLeaseDurationSeconds: 40\n  enablePodsOnNodeSyncStreamWatch: true",
        *(s.read_text() for s in stages)]))
    plane.start("kwok", [
        f"--kubeconfig={plane.state / 'kwok.kubeconfig'}", f"--config={config}",
        "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake", f"--node-ip={NODE_IP}",
        f"--node-port={KUBELET_PORT}", f"--server-address=0.0.0.0:{KUBELET_PORT}", f"--cidr={POD_CIDR}",
        f"--tls-cert-file={d / 'kubelet.crt'}", f"--tls-private-key-file={d / 'kubelet.key'}"])
    wait("the controller manager, scheduler and kwok to answer", lambda: all(
        _alive_or_fail(plane, n, lambda: True)() for n in ("kube-controller-manager", "kube-scheduler", "kwok"))
        and plane.kubectl("get", "serviceaccount", "default", "-n", "default", check=False).returncode == 0,
        90)


def create_aks_rules(plane: Plane, facts) -> None:
    from e2e import aks_rules
    objs = aks_rules.policies(facts)
    if not objs:
        return
    plane.kubectl("apply", "--server-side", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                           "items": objs}))


def check_aks_rules(plane: Plane, facts) -> None:
    """Each pool's rule denies a dry-run removal of its first pool taint (the policy may take a few
    seconds to be enforced after it is created)."""
    from e2e import aks_rules
    for node, taint in aks_rules.probes(facts):
        def denied(node: str = node, taint=taint) -> bool:
            done = plane.kubectl("taint", "node", node, f"{aks_rules.taint_text(taint)}-", "--dry-run=server",
                                 check=False)
            return done.returncode != 0 and aks_rules.POLICY_PREFIX in done.stderr
        wait(f"AKS's rule to deny removing {aks_rules.taint_text(taint)} from {node}", denied, 30)


def create_nodes(plane: Plane, facts) -> list[str]:
    from e2e import pools
    items = pools.nodes(facts)
    plane.kubectl("create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    names = [n["metadata"]["name"] for n in items]
    wait(f"{len(names)} node(s) Ready (kwok)", lambda: _ready(plane, names), 60, plane.logs / "kwok.log")
    return names


def _ready(plane: Plane, names: Sequence[str]) -> bool:
    done = plane.kubectl("get", "nodes", "-o", "json", check=False)
    if done.returncode:
        return False
    ready = {n["metadata"]["name"] for n in json.loads(done.stdout)["items"]
             if any(c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions", []))}
    return set(names) <= ready


# --- commands ------------------------------------------------------------------------------------------
def start(stack: str, bin_dir: Path, state: Path = STATE, config=None, rendering=None, with_volcano: bool = True,
          stages: Sequence[Path] = ()) -> tuple[Plane, object, list[str]]:
    """From inside the namespace: a fresh control plane (an empty etcd) with AKS's rules, the nodes of
    `stack`'s pools and Volcano (its manifest from `rendering`, `stack`'s render by default, and its
    processes: e2e/volcano.py). Without `with_volcano`, no Volcano: whoever deploys next applies its
    manifest (the engine's `pulumi up`, or another team). `stages`: start_control_plane's. Returns the
    plane, the stack's pools (e2e/pools.py) and the node names."""
    from e2e import pools, volcano
    from offline import engine
    stop_processes(state)
    shutil.rmtree(state / "etcd", ignore_errors=True)
    state.mkdir(parents=True, exist_ok=True)
    (state / "bin").unlink(missing_ok=True)
    (state / "bin").symlink_to(bin_dir)
    plane = Plane(state, bin_dir)
    facts = pools.facts(stack, config)
    start_control_plane(plane, stages)
    create_aks_rules(plane, facts)
    names = create_nodes(plane, facts)
    check_aks_rules(plane, facts)
    if with_volcano:
        volcano.start(plane, volcano.manifest(rendering or engine.render(stack, config=config)))
    (state / "stack").write_text(stack)
    return plane, facts, names


def up(stack: str, budget: int = 0) -> int:
    started = time.monotonic()
    if not in_netns():
        from e2e.preflight import problem as preflight
        problem = preflight()
        if problem:
            raise ClusterError(f"cannot start a control plane: {problem}")
        bin_dir = tools(budget)
        lacking = missing_tools(bin_dir)
        if lacking:
            raise ClusterError(f"not built: {', '.join(lacking)} (see e2e/tools/build.sh's output above)")
        netns_up()
        # Everything else runs inside the namespace, children included.
        env = {**os.environ, "E2E_BIN": str(bin_dir)}
        return subprocess.run([*prefix(), sys.executable, "-m", "e2e.cluster", "up", "--stack", stack],
                              env=env, cwd=ROOT).returncode
    try:
        plane, facts, names = start(stack, Path(os.environ["E2E_BIN"]))
    except (ClusterError, subprocess.CalledProcessError) as exc:
        say(f"cluster-up failed: {exc}")
        say("stopping what was started (make cluster-down)")
        down()
        return 1
    except BaseException:  # a defect here: its traceback follows, and nothing it started stays running
        down()
        raise
    say(f"control plane up in {time.monotonic() - started:.0f}s: Kubernetes {facts.kubernetes_version} pools "
        f"{', '.join(p.name for p in facts.pools)}, nodes {', '.join(names)}")
    say(f"kubeconfig: {KUBECONFIG}; kubectl: {plane.bin / 'kubectl'}")
    print(" ".join(prefix()))
    return 0


def down() -> int:
    """End every process whose id cluster-up wrote, remove the namespace it recorded (no other)."""
    stop_processes(STATE)
    if not in_netns() and recorded_netns():
        _ip("netns", "del", NETNS, check=False)
        NETNS_RECORD.unlink()
        say(f"removed network namespace {NETNS}")
    elif not in_netns() and netns_exists():
        say(f"left the network namespace {NETNS} alone: this checkout's cluster-up did not make it")
    shutil.rmtree(STATE / "etcd", ignore_errors=True)
    return 0


def stop_processes(state: Path) -> None:
    """Each process whose id is in state/pids, one after the other in the reverse of the start order (the
    API server ends at once while etcd still answers): SIGTERM to its group, SIGKILL after 10 s."""
    ended = []
    # Volcano's processes (and any other not in PROCESSES) first: they are clients of the API server.
    order = (*PROCESSES[::-1],)
    files = sorted((state / "pids").glob("*.pid"), key=lambda p: order.index(p.stem) + 1 if p.stem in order else 0)
    for pid_file in files:
        pid = read_pid(pid_file)
        if pid and pid_alive(pid):
            try:
                os.killpg(pid, signal.SIGTERM)  # each was started in its own session: its group is its id
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + 10
            while pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if pid_alive(pid):
                say(f"{pid_file.stem} (pid {pid}) did not stop in 10 s: SIGKILL")
                os.killpg(pid, signal.SIGKILL)
            ended.append((pid_file.stem, pid))
        pid_file.unlink()
    if ended:
        say("stopped " + ", ".join(f"{n} ({p})" for n, p in ended))


def status() -> int:
    running = {p.stem: read_pid(p) for p in sorted((STATE / "pids").glob("*.pid"))}
    from e2e import volcano
    for name in (*PROCESSES, *volcano.PROCESSES):
        pid = running.get(name)
        print(f"{name:26} {'running, pid ' + str(pid) if pid and pid_alive(pid) else 'not running'}")
    print(f"network namespace {NETNS}: {'present' if netns_exists() else 'absent'}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m e2e.cluster", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    u = sub.add_parser("up", help="start the control plane and the stack's nodes")
    u.add_argument("--stack", default="dev")
    u.add_argument("--budget", type=int, default=0, help="seconds the tool build may take (0: no limit)")
    sub.add_parser("down", help="stop it and remove its namespace")
    sub.add_parser("status", help="what runs")
    args = p.parse_args(argv)
    try:
        if args.command == "up":
            return up(args.stack, args.budget)
        return down() if args.command == "down" else status()
    except ClusterError as exc:
        say(f"error: {exc}")
        return 1


if __name__ == "__main__":  # run as e2e.cluster, the module e2e/volcano.py imports (one ClusterError class)
    from e2e.cluster import main as module_main
    sys.exit(module_main())
