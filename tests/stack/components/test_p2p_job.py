"""The point-to-point job's osu-build initContainer as Pulumi.hb.yaml renders it (components/fabric/p2p_job.py): the
pinned tarball and its checksum, the binaries where the worker mounts them and the launcher looks, unprivileged and
bounded, the worker's pod template against the Kubernetes schema. The script itself, run for real:
tests/unit/scripts/test_osu_build.py."""

from __future__ import annotations

from pathlib import Path

from components.fabric import p2p_job as p2p
from components.fabric.mpi_job import MPI_HOME
from offline import engine
from tests.schema_checks import as_api, core_errors

JOB_TYPE = "kubernetes:batch.volcano.sh/v1alpha1:Job"
CONFIGMAP = "kubernetes:core/v1:ConfigMap"
HB = "Standard_HB176rs_v4"


def _pod(r: engine.Rendering, task: str) -> dict:
    (job,) = r.of_type(JOB_TYPE)
    (t,) = [t for t in job.inputs["spec"]["tasks"] if t["name"] == task]
    return as_api(t["template"])


def _env(container: dict) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


def _mount_of(container: dict, volume: str) -> dict:
    (m,) = [m for m in container.get("volumeMounts", []) if m["name"] == volume]
    return m


def test_workers_build_osu_in_an_init_container_with_the_pinned_tarball(hb):
    spec = _pod(hb, "mpiworker")["spec"]
    (init,) = spec["initContainers"]
    (worker,) = spec["containers"]
    env = _env(init)
    assert init["name"] == p2p.OSU_BUILD_CONTAINER and init["image"] == worker["image"]
    assert env["OSU_URL"] == p2p.OSU_URL and env["OSU_SHA256"] == p2p.OSU_SHA256
    assert env["OSU_PREBUILT_DIR"] == p2p.OSU_PREBUILT_DIR and env["MPI_HOME"] == MPI_HOME
    # the script it runs is the ConfigMap's, and that ConfigMap holds build-osu.sh as in the repo
    script_mount = _mount_of(init, p2p.OSU_BUILD_CONTAINER)
    assert init["command"][-1].startswith(script_mount["mountPath"] + "/")
    (cm_volume,) = [v for v in spec["volumes"] if v["name"] == p2p.OSU_BUILD_CONTAINER]
    (cm,) = [c for c in hb.of_type(CONFIGMAP)
             if not c.read and c.inputs["metadata"]["name"] == cm_volume["configMap"]["name"]]
    assert cm.inputs["data"] == {Path(init["command"][-1]).name: p2p.BUILD_SCRIPT.read_text()}
    (job,) = hb.of_type(JOB_TYPE)
    assert hb.depends_on(job, cm)


def test_the_binaries_land_where_the_worker_mounts_them_and_the_launcher_looks(hb):
    spec = _pod(hb, "mpiworker")["spec"]
    (init,) = spec["initContainers"]
    (worker,) = spec["containers"]
    (volume,) = [v for v in spec["volumes"] if v["name"] == p2p.OSU_VOLUME]
    assert "emptyDir" in volume
    init_mount, worker_mount = _mount_of(init, p2p.OSU_VOLUME), _mount_of(worker, p2p.OSU_VOLUME)
    assert init_mount["mountPath"] == worker_mount["mountPath"]  # links stay valid in the worker
    assert not init_mount.get("readOnly") and worker_mount.get("readOnly") is True
    bin_dir, prefix = _env(init)["OSU_BIN_DIR"], _env(init)["OSU_PREFIX"]
    for path in (bin_dir, prefix):
        assert Path(path).is_relative_to(init_mount["mountPath"]), path
    (launcher,) = _pod(hb, "mpimaster")["spec"]["containers"]
    assert _env(launcher)["OSU_DIR"] == bin_dir == p2p.OSU_DIR
    assert "initContainers" not in _pod(hb, "mpimaster")["spec"]  # mpirun runs the binaries on the workers


def test_the_init_container_is_unprivileged_modest_and_bounded(render_kubernetes):
    from tests.stack.test_hb_stack import GATE  # test_hb_stack's variant, one render for both: its timeoutMinutes is 45

    assert GATE["timeoutMinutes"] == 45
    spec = _pod(render_kubernetes(ibPool={"vmSize": HB}, fabricTest=GATE), "mpiworker")["spec"]
    (init,) = spec["initContainers"]
    sc = init["securityContext"]
    assert sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False
    assert "add" not in sc["capabilities"] and sc["capabilities"]["drop"] == ["NET_RAW"]
    requests = init["resources"]["requests"]
    assert set(requests) == {"cpu", "memory"}  # no RDMA device: the build needs none
    assert "limits" not in init["resources"] or not any("rdma" in k for k in init["resources"]["limits"])
    # the pod's deadline (fabricTest.timeoutMinutes) bounds the build too: it counts from the pod's start
    assert spec["activeDeadlineSeconds"] == 45 * 60


def test_worker_pod_template_passes_the_kubernetes_schema(hb):
    for task in ("mpimaster", "mpiworker"):
        template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": task},
                    "template": _pod(hb, task)}
        assert core_errors(template) == [], task
    broken = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "x"}, "template": _pod(hb, "mpiworker")}
    broken["template"]["spec"]["initContainers"][0]["volumeMount"] = []  # a misspelt field is caught
    assert core_errors(broken)
