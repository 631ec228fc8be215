"""Row 10: the in-cluster certifier's home: its namespace, ServiceAccount and least-privilege RBAC, the
project's own judge and cluster-side code as a content-hashed ConfigMap, the ConfigMaps it writes (result, history),
the lowest PriorityClass, and the CronJob that re-certifies idle nodes. The day-0 Job that `pulumi up`
awaits is components/fabric/fabric_check.py's; both run `pod_spec`.

How the code reaches the cluster (docs/fabric-certifier.md weighs it against ACR Tasks): the modules of
`core/`, `verify/` and `clusterside/` in this checkout that `python -m verify` imports (clusterside/certify.py
`code_files`), as ConfigMap data, mounted into a public Python image pinned by digest. The pod imports only
the standard library (clusterside/kube_api.py), so nothing is downloaded when it starts and a cluster with
no egress runs it once the image is mirrored (`az acr import` keeps the digest). The pods carry the code's sha256
(CODE_SHA256_ENV) and the certifier refuses to run code whose hash differs (clusterside/certify_cli.py): what
runs is what the preview showed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from clusterside import certify, certify_admit, certify_kube, certify_recurring, certify_serve
from clusterside.certify_cli import CODE_SHA256_ENV
from clusterside.kube import VOLCANO_GROUP
from components.fabric import certifier_alerts, certifier_bounds
from components.namespace import Namespace, NamespaceArgs
from core import choices, defaults

core_v1, meta, rbac = k8s.core.v1, k8s.meta.v1, k8s.rbac.v1

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "fabric-certifier"
SERVICE_ACCOUNT = "fabric-certifier"
CODE_CONFIGMAP = "fabric-certifier-code"
RESULT_CONFIGMAP = "fabric-certifier-result"
HISTORY_CONFIGMAP = "fabric-certifier-history"
RACK_RESULT_CONFIGMAP = "fabric-certifier-rack-result"  # the rack's NVLink run, apart from the verdict
TEMPLATE_CONFIGMAP = "fabric-certifier-template"  # the re-test job's spec (clusterside/certify_recurring.py)
# holds new boots, re-tests held nodes (clusterside/certify_admit.py)
ADMISSION_DEPLOYMENT = "fabric-certifier-admission"
CODE_DIR = "/opt/aks-infiniband"
# certifier.image and certifier.schedule: core/defaults.py's, the configuration's too (any image with
# python3 >= 3.11 works; the default is the pin table's pythonImage).
DEFAULT_IMAGE = defaults.CERTIFIER_IMAGE
DEFAULT_SCHEDULE = defaults.CERTIFIER_SCHEDULE
# Below every workload: pods with no class get 0. Never preempts anyone; the kube-scheduler may preempt it.
PRIORITY_CLASS = certify_recurring.PRIORITY_CLASS
PRIORITY_VALUE = -1000
NOBODY = 65534
LABELS = {"app.kubernetes.io/name": "fabric-certifier", "app.kubernetes.io/part-of": "aks-infiniband"}
ADMISSION_SELECTOR = {**LABELS, "app.kubernetes.io/component": "admission"}
POOL_LABEL = "aks-infiniband.io/certified-pool"  # which pool's admission loop a pod is, in a stack of several
CRONJOB = "fabric-certifier"  # the recurring run's CronJob (its Jobs: fabric-certifier-<minute>)


def config_key(path: str) -> str:
    """A ConfigMap key for a file path (keys allow [-._a-zA-Z0-9]): `verify/doctor.py` -> `verify.doctor.py`."""
    return path.replace("/", ".")


@dataclass(frozen=True)
class RackAccess:
    """The GB200/GB300 rack's NVLink run, which the certifier judges too (into its own result ConfigMap): the
    namespace where it reads that run's job and log (rack_rules), through the `{name}-rack` Role there."""

    namespace_name: str
    # The run's namespace, which that Role waits for. The run is declared after the certifier (it waits for
    # the verdict's certify Job: both take every GPU), so the assembly passes a pulumi.deferred_output and
    # resolves it once the run is declared (stack/rack.py).
    namespace: pulumi.Input[pulumi.Resource]


@dataclass(frozen=True)
class PoolCertification:
    """One pool's certification in a stack of several IB pools, each its own fabric: where its fabric test
    runs and what its re-test is. Its nodes are certified against each other only (`--pool`), with their own
    result, history, template, admission loop and recurring run, each named `<name>-<pool>`."""

    pool: str  # the agent pool's name (kubernetes.azure.com/agentpool)
    fabric_namespace: str
    retest: Mapping[str, Any] | None = None

    @property
    def suffix(self) -> str:
        return f"-{self.pool}"


@dataclass(frozen=True)
class _Single:
    """The stack's only pool: every IB node, and the names a one-pool stack always had."""

    fabric_namespace: str
    retest: Mapping[str, Any] | None
    pool: None = None
    suffix: str = ""


@dataclass(frozen=True)
class CertifierArgs:
    fabric_namespace: str  # where the fabric test jobs run (the certifier reads their pods and logs)
    image: str = DEFAULT_IMAGE
    mode: str = choices.DEFAULT_CERTIFIER_MODE  # core.choices.CERTIFIER_MODES
    schedule: str = DEFAULT_SCHEDULE  # cron, or "off": no recurring certification
    max_quarantine_share: float = certify.DEFAULT_MAX_QUARANTINE_SHARE
    history_size: int = 10
    pushgateway_url: str | None = None
    # scale to zero: how long a held node with no peer waits before the admission loop reports it
    peer_wait_minutes: float = certify_admit.DEFAULT_PEER_WAIT_MINUTES
    # what a recurring run re-runs (components/fabric/nccl_job.py retest_template); None: no recurring runs
    retest: Mapping[str, Any] | None = None
    # the fabric test job's namespace (it must exist before the Role in it)
    wait_for: Sequence[pulumi.Resource] = ()
    # GB200/GB300: the rack's NVLink run is judged too, into its own result ConfigMap; None: no rack run
    rack: RackAccess | None = None
    # the GPUs are DRA devices (GB200, GB300, rdmaMode dra: core.dra.needs): the admission loop reads their
    # ResourceSlices to know a node can run a test (clusterside/certify_admit.py), and may list them
    dra_gpus: bool = False
    # alerts.enabled: the schedule's longest gap between runs (stack_config.cron.longest_gap_seconds; 0 with
    # schedule off), for the PrometheusRule and PodMonitor (components/fabric/certifier_alerts.py); None: none
    alerts_period_seconds: int | None = None
    # Several IB pools: each pool's certification (fabric_namespace and retest above are then unused); empty:
    # the stack's one pool, as fabric_namespace and retest say.
    pools: Sequence[PoolCertification] = ()

    def __post_init__(self) -> None:
        certify.Policy(mode=self.mode, max_quarantine_share=self.max_quarantine_share)  # one rule: verify's

    @property
    def certified(self) -> Sequence[PoolCertification | _Single]:
        """What is certified on its own: each pool of several, or the one pool."""
        return tuple(self.pools) or (_Single(self.fabric_namespace, self.retest),)

    def of(self, pool: str | None) -> PoolCertification | _Single:
        """The certification of `pool` (None: the stack's one pool)."""
        return next(c for c in self.certified if c.pool == pool)


def policy_args(args: CertifierArgs, pool: str | None = None) -> list[str]:
    """The certifier's policy flags, the same for the day-0 Job and the CronJob (only the day-0 Job
    writes the result ConfigMap: it holds what the stack outputs report); with `pool`, that pool's."""
    sfx = args.of(pool).suffix
    argv = ["--mode", args.mode, "--max-quarantine-share", f"{args.max_quarantine_share:g}",
            "--certifier-namespace", NAMESPACE, "--history-configmap", HISTORY_CONFIGMAP + sfx,
            "--template-configmap", TEMPLATE_CONFIGMAP + sfx,
            "--history-size", str(args.history_size), *(["--pool", pool] if pool else [])]
    return argv + (["--pushgateway", args.pushgateway_url] if args.pushgateway_url else [])


def probes(port: int) -> dict[str, Any]:
    """The admission loop's server (clusterside/certify_serve.py): liveness restarts a loop whose passes no
    longer end, readiness shows one whose passes no longer read the nodes (the hold fails open)."""
    return {"ports": [core_v1.ContainerPortArgs(name="metrics", container_port=port, protocol="TCP")],
            "liveness_probe": core_v1.ProbeArgs(http_get=core_v1.HTTPGetActionArgs(path="/healthz", port="metrics"),
                                                period_seconds=10, timeout_seconds=5, failure_threshold=3),
            "readiness_probe": core_v1.ProbeArgs(http_get=core_v1.HTTPGetActionArgs(path="/readyz", port="metrics"),
                                                 period_seconds=10, timeout_seconds=5, failure_threshold=1)}


def pod_spec(image: str, argv: Sequence[str], code_sha: str, files: Sequence[str],
             priority_class: str | None = None, restart_policy: str = "Never",
             serve_port: int | None = None) -> core_v1.PodSpecArgs:
    """One container running `python -m verify <argv>` from the mounted code, as nobody, read-only; with
    `serve_port`, its metrics port and the probes on it."""
    return core_v1.PodSpecArgs(
        service_account_name=SERVICE_ACCOUNT,
        restart_policy=restart_policy,
        priority_class_name=priority_class,
        node_selector={"kubernetes.io/os": "linux"},
        security_context=core_v1.PodSecurityContextArgs(
            run_as_non_root=True, run_as_user=NOBODY, run_as_group=NOBODY,
            seccomp_profile=core_v1.SeccompProfileArgs(type="RuntimeDefault")),
        containers=[core_v1.ContainerArgs(
            name="certify",
            image=image,
            image_pull_policy="IfNotPresent",
            command=["python3", "-S", "-m", "verify", *argv],  # -S: the standard library only
            working_dir=CODE_DIR,
            env=[core_v1.EnvVarArgs(name=CODE_SHA256_ENV, value=code_sha),
                 core_v1.EnvVarArgs(name="PYTHONDONTWRITEBYTECODE", value="1")],
            resources=core_v1.ResourceRequirementsArgs(requests={"cpu": "100m", "memory": "128Mi"},
                                                       limits={"cpu": "1", "memory": "512Mi"}),
            security_context=core_v1.SecurityContextArgs(
                allow_privilege_escalation=False, read_only_root_filesystem=True, run_as_non_root=True,
                capabilities=core_v1.CapabilitiesArgs(drop=["ALL"])),
            volume_mounts=[core_v1.VolumeMountArgs(name="code", mount_path=CODE_DIR, read_only=True),
                           core_v1.VolumeMountArgs(name="tmp", mount_path="/tmp")],  # noqa: S108 (emptyDir)
            **(probes(serve_port) if serve_port else {}),
        )],
        volumes=[
            core_v1.VolumeArgs(name="code", config_map=core_v1.ConfigMapVolumeSourceArgs(
                name=CODE_CONFIGMAP, items=[core_v1.KeyToPathArgs(key=config_key(p), path=p) for p in files])),
            core_v1.VolumeArgs(name="tmp", empty_dir=core_v1.EmptyDirVolumeSourceArgs(size_limit="16Mi")),
        ],
    )


def cluster_rules(dra_gpus: bool = False) -> list[rbac.PolicyRuleArgs]:
    """Nodes: read, taint and label (patch), the FabricCertified condition (nodes/status); pods: read,
    cluster-wide, to see which IB nodes run GPU work (idle capacity); with DRA GPUs, list ResourceSlices
    (whether a node's GPUs are published: clusterside/certify_admit.py)."""
    return [rbac.PolicyRuleArgs(api_groups=[""], resources=["nodes"], verbs=["get", "list", "watch", "patch"]),
            rbac.PolicyRuleArgs(api_groups=[""], resources=["nodes/status"], verbs=["patch"]),
            rbac.PolicyRuleArgs(api_groups=[""], resources=["pods"], verbs=["get", "list"]),
            *([rbac.PolicyRuleArgs(api_groups=["resource.k8s.io"], resources=["resourceslices"], verbs=["list"])]
              if dra_gpus else [])]


def fabric_rules() -> list[rbac.PolicyRuleArgs]:
    """In the fabric test's namespace: the test pods' logs, and its own Volcano test jobs."""
    return [rbac.PolicyRuleArgs(api_groups=[""], resources=["pods/log"], verbs=["get"]),
            rbac.PolicyRuleArgs(api_groups=[VOLCANO_GROUP], resources=["jobs"],
                                verbs=["get", "list", "create", "delete"])]


def rack_rules() -> list[rbac.PolicyRuleArgs]:
    """In the rack run's namespace: read its job and the launcher's log; it creates no job there."""
    return [rbac.PolicyRuleArgs(api_groups=[""], resources=["pods/log"], verbs=["get"]),
            rbac.PolicyRuleArgs(api_groups=[VOLCANO_GROUP], resources=["jobs"], verbs=["get", "list"])]


def own_rules(rack: bool = False, suffixes: Sequence[str] = ("",)) -> list[rbac.PolicyRuleArgs]:
    """In its own namespace: exactly its ConfigMaps, each pool's (`suffixes`; create cannot be limited by name,
    so the stack creates them and the certifier only reads and patches them)."""
    names = [f"{base}{sfx}" for sfx in suffixes for base in (RESULT_CONFIGMAP, HISTORY_CONFIGMAP, TEMPLATE_CONFIGMAP)]
    names += [RACK_RESULT_CONFIGMAP] if rack else []
    return [rbac.PolicyRuleArgs(api_groups=[""], resources=["configmaps"], verbs=["get", "patch"],
                                resource_names=names)]


def event_rules() -> list[rbac.PolicyRuleArgs]:
    """In `default`, the only namespace where the API accepts an Event about a Node: create Events."""
    return [rbac.PolicyRuleArgs(api_groups=["events.k8s.io"], resources=["events"], verbs=["create"])]


def role(name: str, namespace: pulumi.Input[str], rules: list[rbac.PolicyRuleArgs],
         opts: pulumi.ResourceOptions) -> rbac.Role:
    """A `fabric-certifier` Role in `namespace`, bound to the certifier's ServiceAccount (`{name}-binding`)."""
    r = rbac.Role(name, metadata=meta.ObjectMetaArgs(name="fabric-certifier", namespace=namespace, labels=LABELS),
                  rules=rules, opts=opts)
    rbac.RoleBinding(f"{name}-binding", metadata=meta.ObjectMetaArgs(
        name="fabric-certifier", namespace=namespace, labels=LABELS),
        role_ref=rbac.RoleRefArgs(api_group="rbac.authorization.k8s.io", kind="Role", name=r.metadata.name),
        subjects=[rbac.SubjectArgs(kind="ServiceAccount", name=SERVICE_ACCOUNT, namespace=NAMESPACE)], opts=opts)
    return r


class Certifier(pulumi.ComponentResource):
    """`{name}-namespace` (restricted), `{name}-sa`, `{name}-nodes` ClusterRole (+ `-binding`), `{name}-fabric`
    Role in the fabric test's namespace, `{name}-own` in its own, `{name}-events` in `default` and with `rack`
    `{name}-rack` in the rack run's (each + `-binding`), `{name}-code`,
    `{name}-result`, `{name}-history` (and with `rack`, `{name}-rack-result`) ConfigMaps, `{name}-priority`
    PriorityClass, `{name}-template` (the re-test job) with `retest`, `{name}-admission` Deployment unless the
    mode is off (declared by admit_after, after the day-0 verdict), `{name}-recurring` CronJob unless
    `schedule` is off, and with `alerts_period_seconds` `{name}-alerts` PrometheusRule and (with the
    admission loop) `{name}-scrape` PodMonitor."""

    def __init__(self, name: str, args: CertifierArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aks-infiniband:kubernetes:Certifier", name, None, opts)
        self.args, self._name = args, name
        child = pulumi.ResourceOptions(parent=self)
        self.namespace = Namespace(f"{name}-namespace", NamespaceArgs(namespace_name=NAMESPACE), opts=child)
        ns = self.namespace.name
        self.service_account = core_v1.ServiceAccount(
            f"{name}-sa", metadata=meta.ObjectMetaArgs(name=SERVICE_ACCOUNT, namespace=ns, labels=LABELS), opts=child)
        subject = rbac.SubjectArgs(kind="ServiceAccount", name=SERVICE_ACCOUNT, namespace=NAMESPACE)
        self.cluster_role = rbac.ClusterRole(
            f"{name}-nodes", metadata=meta.ObjectMetaArgs(name="aks-infiniband-fabric-certifier", labels=LABELS),
            rules=cluster_rules(args.dra_gpus), opts=child)
        rbac.ClusterRoleBinding(
            f"{name}-nodes-binding",
            metadata=meta.ObjectMetaArgs(name="aks-infiniband-fabric-certifier", labels=LABELS),
            role_ref=rbac.RoleRefArgs(api_group="rbac.authorization.k8s.io", kind="ClusterRole",
                                      name=self.cluster_role.metadata.name),
            subjects=[subject], opts=child)
        in_fabric = pulumi.ResourceOptions(parent=self, depends_on=list(args.wait_for))
        certified = args.certified
        for c in certified:  # each pool's test namespace (one pool: `{name}-fabric`, as it always was)
            role(f"{name}-fabric{c.suffix}", c.fabric_namespace, fabric_rules(), in_fabric)
        role(f"{name}-own", ns, own_rules(args.rack is not None, [c.suffix for c in certified]), child)
        role(f"{name}-events", certify_kube.EVENTS_NAMESPACE, event_rules(), child)
        self.rack_role = role(f"{name}-rack", args.rack.namespace_name, rack_rules(), pulumi.ResourceOptions(
            parent=self, depends_on=[args.rack.namespace])) if args.rack else None
        # what RBAC cannot say: which Jobs and which node fields (components/fabric/certifier_bounds.py)
        images = list(dict.fromkeys(i for c in certified if c.retest for i in certifier_bounds.images(c.retest)))
        certifier_bounds.declare(name, f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}", images, LABELS, child)
        files = certify.code_files(ROOT)
        self.code_sha256 = certify.code_sha256(files)
        self.files = tuple(files)
        self.code = core_v1.ConfigMap(
            f"{name}-code", metadata=meta.ObjectMetaArgs(
                name=CODE_CONFIGMAP, namespace=ns, labels=LABELS,
                annotations={"aks-infiniband.io/code-sha256": self.code_sha256}),
            data={config_key(p): text for p, text in files.items()}, opts=child)
        # The certifier writes their data; the stack only creates them (and must not undo those writes).
        written = pulumi.ResourceOptions(parent=self, ignore_changes=["data"])
        results, histories = ({c.pool: core_v1.ConfigMap(f"{name}-{role_}{c.suffix}", metadata=meta.ObjectMetaArgs(
            name=f"{base}{c.suffix}", namespace=ns, labels=LABELS), data={}, opts=written) for c in certified}
            for role_, base in (("result", RESULT_CONFIGMAP), ("history", HISTORY_CONFIGMAP)))
        self.results, self.histories = results, histories
        self.result, self.history = results[certified[0].pool], histories[certified[0].pool]
        self.priority_class = k8s.scheduling.v1.PriorityClass(
            f"{name}-priority", metadata=meta.ObjectMetaArgs(name=PRIORITY_CLASS, labels=LABELS),
            value=PRIORITY_VALUE, preemption_policy="Never", global_default=False,
            description="aks-infiniband's recurring fabric certification: below every workload, preempts no one.",
            opts=child)
        self.ready = [self.service_account, self.code, *results.values(), *histories.values()]
        if args.rack:
            self.ready.append(core_v1.ConfigMap(f"{name}-rack-result", metadata=meta.ObjectMetaArgs(
                name=RACK_RESULT_CONFIGMAP, namespace=ns, labels=LABELS), data={}, opts=written))
        self.cron_job = self.admission = self.template = None
        self.templates: dict[str | None, core_v1.ConfigMap] = {}
        self.cron_job_names: dict[str | None, str] = {}  # each pool's recurring CronJob, by pool (None: the one)
        for c in certified:
            self._declare_recurring(name, args, c, ns, child)
        # the admission loop's Deployments: admit_after, once each pool's day-0 verdict is in
        self.admits = args.mode != "off" and self.template is not None
        self.alerts = []
        if args.alerts_period_seconds is not None:  # each pool's rules (certifier_alerts.PoolAlerts)
            self.alerts = certifier_alerts.declare(name, certifier_alerts.AlertsArgs(
                namespace=NAMESPACE, period_seconds=args.alerts_period_seconds,
                pools=[self._pool_alerts(args, c) for c in certified],
            ), LABELS, ADMISSION_SELECTOR, pulumi.ResourceOptions(parent=self, depends_on=[self.namespace]))
        self.register_outputs({"namespace": ns, "code_sha256": self.code_sha256})

    def _pool_alerts(self, args: CertifierArgs, c: PoolCertification | _Single) -> certifier_alerts.PoolAlerts:
        """Pool `c`'s certification as its alert rules read it: its CronJob, whether its admission loop runs
        (admit_after declares it for a pool whose test re-tests), how long one of its re-tests may run."""
        run_seconds = certify_recurring.run_minutes(c.retest) * 60 if c.retest else 0
        return certifier_alerts.PoolAlerts(
            pool=c.pool, cronjob=self.cron_job_names.get(c.pool), admission=self.admits and c.retest is not None,
            run_seconds=run_seconds,
            held_bound_seconds=int(certify_admit.DEFAULT_RETEST_AFTER_MINUTES * 60) + run_seconds)

    def _declare_recurring(self, name: str, args: CertifierArgs, c: PoolCertification | _Single,
                           ns: pulumi.Input[str], child: pulumi.ResourceOptions) -> None:
        """A pool's re-test template and its recurring run (unless the schedule is off); the first pool's are
        `self.template` and `self.cron_job`."""
        if c.retest is None:
            return
        sfx, first = c.suffix, self.template is None
        template = core_v1.ConfigMap(f"{name}-template{sfx}", metadata=meta.ObjectMetaArgs(
            name=TEMPLATE_CONFIGMAP + sfx, namespace=ns, labels=LABELS),
            data={"job.json": json.dumps(c.retest, sort_keys=True)}, opts=child)
        self.templates[c.pool] = template
        cron_job = None
        if args.schedule != "off":
            argv = ["certify", "--recurring", "--namespace", c.fabric_namespace, *policy_args(args, c.pool)]
            cron_job = k8s.batch.v1.CronJob(
                f"{name}-recurring{sfx}",
                metadata=meta.ObjectMetaArgs(name=CRONJOB + sfx, namespace=ns, labels=LABELS),
                spec=k8s.batch.v1.CronJobSpecArgs(
                    schedule=args.schedule, concurrency_policy="Forbid", starting_deadline_seconds=600,
                    successful_jobs_history_limit=3, failed_jobs_history_limit=3,
                    job_template=k8s.batch.v1.JobTemplateSpecArgs(spec=k8s.batch.v1.JobSpecArgs(
                        # the run waits for its re-test and judges it: its deadline is that, not a guess
                        backoff_limit=0, active_deadline_seconds=certify_recurring.run_minutes(c.retest) * 60,
                        ttl_seconds_after_finished=24 * 3600,
                        template=core_v1.PodTemplateSpecArgs(
                            metadata=meta.ObjectMetaArgs(labels=LABELS),
                            spec=pod_spec(args.image, argv, self.code_sha256, self.files, PRIORITY_CLASS))))),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[*self.ready, template, self.priority_class]))
        if cron_job:
            self.cron_job_names[c.pool] = CRONJOB + sfx
        if first:
            self.template, self.cron_job = template, cron_job

    def admit_after(self, day0: Sequence[pulumi.Resource], pool: str | None = None) -> k8s.apps.v1.Deployment | None:
        """`{name}-admission` (of `pool`, in a stack of several: `{name}-admission-<pool>`) unless the mode is off
        or the pool's test has no re-test: one loop at a time (Recreate) that holds every new boot and re-tests
        held nodes (clusterside/certify_admit.py), created once `day0` (the day-0 certify Job, which the provider
        awaits to completion) is done. Started before it, the loop held every node while day 0 waited and started
        a re-test over them beside the day-0 run; after it, each boot day 0 ran on has passed or is quarantined,
        and only the others are held."""
        c = self.args.of(pool)
        if not self.admits or c.pool not in self.templates:
            return None
        args, ns, sfx = self.args, self.namespace.name, c.suffix
        argv = ["certify", "--admit", "--namespace", c.fabric_namespace, *policy_args(args, c.pool),
                "--metrics-port", str(certify_serve.DEFAULT_PORT), *(["--dra-gpus"] if args.dra_gpus else [])]
        if args.peer_wait_minutes != certify_admit.DEFAULT_PEER_WAIT_MINUTES:  # the default: the pod's own
            argv += ["--peer-wait-minutes", f"{args.peer_wait_minutes:g}"]
        # every pool's loop carries ADMISSION_SELECTOR (the PodMonitor's), and its pool's label to tell them apart
        selector = {**ADMISSION_SELECTOR, **({POOL_LABEL: c.pool} if c.pool else {})}
        admission = k8s.apps.v1.Deployment(
            f"{self._name}-admission{sfx}",
            metadata=meta.ObjectMetaArgs(name=ADMISSION_DEPLOYMENT + sfx, namespace=ns, labels=selector),
            spec=k8s.apps.v1.DeploymentSpecArgs(
                replicas=1, strategy=k8s.apps.v1.DeploymentStrategyArgs(type="Recreate"),
                selector=meta.LabelSelectorArgs(match_labels=selector),
                template=core_v1.PodTemplateSpecArgs(
                    metadata=meta.ObjectMetaArgs(labels=selector),
                    spec=pod_spec(args.image, argv, self.code_sha256, self.files, restart_policy="Always",
                                  serve_port=certify_serve.DEFAULT_PORT))),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*self.ready, self.templates[c.pool],
                                                                 self.priority_class, *day0]))
        if self.admission is None:
            self.admission = admission
        return admission
