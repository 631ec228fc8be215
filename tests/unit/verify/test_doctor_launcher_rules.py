"""The launcher's patterns (verify/launcher_env.py) against verify's own parsers: the values the job
hands scripts/nccl-launcher.sh must read every log as verify reads it, so that the launcher holds no
rule of its own and none drifts. Read here with Python's `re`, as POSIX EREs (the launcher's awk reads
the same strings; tests/stack/components/test_doctor_launcher.py and tests/unit/verify/test_verify_transport.py
run it)."""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.nccl_logs import launcher_log, worker_hosts
from tests.paths import DATA, ROOT
from verify import launcher_env, loglines, sections, transport

RECORDED = sorted([*DATA.glob("nccl-info_*.log"), *DATA.glob("doctor-launcher_*.log"),
                   *(DATA / "public-nccl-info").glob("*.log")])
HOSTS = worker_hosts(4)
CONSTRUCTED = {
    "healthy": launcher_log(HOSTS, 8),
    "sockets on one host": launcher_log(HOSTS, 8, network="Socket"),
    "7 of 8 HCAs on one host": launcher_log(HOSTS, 8, hcas={HOSTS[2]: 7}),
    "no GPUDirect RDMA": launcher_log(HOSTS, 8, gdr=False),
    "merged HCAs": launcher_log(HOSTS, 8).replace("[0]mlx5_ib0:1/IB", "[0]mlx5_ib0+mlx5_ib9:1/IB"),
}
LOGS = {**{p.name: p.read_text(errors="replace") for p in RECORDED}, **CONSTRUCTED}


def every_value() -> dict[str, str]:
    return {**launcher_env.log_filter_env(), **launcher_env.result_env(),
            "DOCTOR_RUN_IF": launcher_env.transport_rules(True, 8)}


def test_every_pattern_is_a_posix_ere():
    """No Python-only syntax, which awk would read otherwise or not at all."""
    python_only = re.compile(r"\\[dDsSwWbBAZ]|\(\?|\*\?|\+\?|\{")
    for name, value in every_value().items():
        for pattern in value.split("\t") if name == "DOCTOR_RUN_IF" else [value]:
            assert not python_only.search(pattern), (name, pattern)


def test_the_parsers_prefixes_are_the_eres_the_launcher_gets():
    assert loglines.ROW_COLUMNS.pattern == loglines.ROW_COLUMNS_ERE == launcher_env.log_filter_env()["LOG_ROW_ERE"]
    assert loglines._TAG.pattern == loglines.TAG_ERE == launcher_env.log_filter_env()["LOG_TAG_ERE"]
    assert loglines.HOST_ERE in loglines._NCCL.pattern


def first_rule(text: str, rules: str) -> str | None:
    """DOCTOR_RUN_IF as the launcher's run_if reads it."""
    parsed = [r.split("\t") for r in rules.splitlines()]
    hit = set()
    for line in text.splitlines():
        for i, r in enumerate(parsed):
            if re.search(r[1], line) and (len(r) == 2 or len(re.findall(r[2], line)) < int(r[3])):
                hit.add(i)
    return next((parsed[i][0] for i in sorted(hit)), None)


@functools.cache
def parsed(text: str) -> transport.Transport:
    """verify.transport's reading of a log, once per log for the three (expects_gdr, hcas) cases."""
    return transport.parse(text)


def verdicts_rule(text: str, expects_gdr: bool, hcas: int) -> str | None:
    """The same decision from verify.transport's reading of the log (verify.verdict's rules)."""
    t = parsed(text)
    if t.socket_hosts:
        return launcher_env.SOCKETS
    if expects_gdr and t.hosts_without_gdr():
        return launcher_env.NO_GDRDMA
    if any(len(names) < hcas for names in t.hcas_by_host.values()):
        return launcher_env.FEWER_HCAS
    return None


@pytest.mark.parametrize("name", sorted(LOGS))
@pytest.mark.parametrize("expects_gdr, hcas", [(True, 8), (False, 8), (True, 4)])
def test_the_transport_rules_decide_as_verify_reads_the_log(name, expects_gdr, hcas):
    text = LOGS[name]
    assert first_rule(text, launcher_env.transport_rules(expects_gdr, hcas)) == verdicts_rule(text, expects_gdr, hcas)


def test_the_constructed_logs_cover_every_rule():
    found = {first_rule(text, launcher_env.transport_rules(True, 8)) for text in CONSTRUCTED.values()}
    assert found == {None, launcher_env.SOCKETS, launcher_env.NO_GDRDMA, launcher_env.FEWER_HCAS}
    assert first_rule(CONSTRUCTED["merged HCAs"], launcher_env.transport_rules(True, 9)) is None  # 9 names


def largest_busbw(text: str) -> float | None:
    """LOG_RESULT_* as the launcher's largest_busbw reads them (on whole rows)."""
    env = launcher_env.result_env()
    size_field, busbw_field = (int(f) - 1 for f in env["LOG_RESULT_FIELDS"].split())
    best, bad = None, False
    for line in text.splitlines():
        line = loglines.untag(line)
        if re.search(env["LOG_RESULT_ROW_ERE"], line):
            if not re.search(env["LOG_RESULT_OK_ERE"], line):
                bad = True
            elif best is None or int(line.split()[size_field]) >= best[0]:
                best = (int(line.split()[size_field]), float(line.split()[busbw_field]))
    return None if bad or best is None else best[1]


@pytest.mark.parametrize("name", sorted(LOGS))
def test_the_result_row_reads_the_figure_verify_reads(name):
    text = LOGS[name]
    parts = sections.split(text)
    texts = [s.text for s in parts if s.name in (None, sections.ALLREDUCE, sections.PAIR)] if any(
        s.name for s in parts) else [text]
    for part in texts:
        figure, why = sections.nccl_figure(part)
        if why and "rank" in why:
            continue
        assert largest_busbw(part) == (None if figure is None else pytest.approx(figure, abs=0.005)), why


def test_a_row_with_wrong_elements_gives_no_figure():
    text = launcher_log(HOSTS, 8, busbw_gbps=180.0)
    last = max(i for i, line in enumerate(text.splitlines()) if loglines.ROW_COLUMNS.match(loglines.untag(line)))
    lines = text.splitlines()
    lines[last] = lines[last].rsplit(" ", 1)[0] + " 3"  # in-place #wrong
    assert largest_busbw("\n".join(lines)) is None and sections.nccl_figure("\n".join(lines))[0] is None


@pytest.mark.parametrize("name", sorted(LOGS))
def test_the_filter_keeps_every_info_line_verify_reads(name):
    """Every INFO message verify.transport or verify.nccl takes something from matches the kept
    messages (LOG_NCCL_KEEP_ERE) or is a connection (LOG_NCCL_CONNECTION_ERE)."""
    env = launcher_env.log_filter_env()
    readers = [transport._USING_NETWORK, transport._NET_USING, transport._NO_IB_DEVICE, transport._HCA_GDR,
               transport._DISTANCE_GDR_OFF, transport._CHANNEL, transport._COLLNET, transport._COMM,
               transport._PLUGIN, re.compile(r"^NCCL version ")]
    for raw in LOGS[name].splitlines():
        line = loglines.nccl_line(loglines.untag(raw))
        if line is None or line.level != "INFO" or not any(r.match(line.message) for r in readers):
            continue
        kept = env["LOG_NCCL_KEEP_ERE"], env["LOG_NCCL_CONNECTION_ERE"]
        assert any(re.search(k, line.message) for k in kept), line.message


def test_a_script_outside_the_job_gets_the_same_values(tmp_path):
    """tests/data/recording/ runs the launcher on a GPU machine with `python3 -m verify.launcher_env`'s
    records exported: the values arrive in bash byte for byte, tabs and newlines included."""
    root = ROOT
    script = ("while IFS= read -r -d '' kv; do export \"$kv\"; done < <(python3 -m verify.launcher_env); "
              "printf '%s\\0' \"$DOCTOR_RUN_IF\" \"$LOG_RESULT_ROW_ERE\"")
    done = subprocess.run(["bash", "-c", script], cwd=root, capture_output=True, text=True, timeout=60, check=True,
                          env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    assert done.stdout.split("\0")[:2] == [launcher_env.transport_rules(True, 8), launcher_env.ROW_ERE]


# --- a node's HCA listing: the launcher's InfiniBand devices are verify.hca's ---------------------
LAUNCHER = ROOT / "scripts" / "nccl-launcher.sh"


def _port(dev: str, layer: str | None, port: int = 1) -> str:
    lines = [f"Infiniband device '{dev}' port {port} status:", "\tstate:\t 4: ACTIVE", "\tphys_state:\t 5: LinkUp",
             "\trate:\t 400 Gb/sec (4X NDR)"]
    return "\n".join(lines + ([f"\tlink_layer:\t {layer}"] if layer is not None else [])) + "\n"


HCA_LISTINGS = {
    "eight IB ports": "".join(_port(f"mlx5_ib{i}", "InfiniBand") for i in range(8)),
    "with ND H200 v5's Ethernet mlx5_an0": _port("mlx5_an0", "Ethernet") + _port("mlx5_ib0", "InfiniBand"),
    "an empty link layer (an unreadable file)": _port("mlx5_ib0", "") + _port("mlx5_an0", "Ethernet"),
    "no link layer line": _port("mlx5_ib1", None) + _port("mlx5_an0", "Ethernet"),
    "two ports of one device": _port("mlx5_ib0", "Ethernet", 1) + _port("mlx5_ib0", "InfiniBand", 2),
    "a block ended by another line": _port("mlx5_ib0", None) + "ibv_devinfo\n\t\tlink_layer:\tEthernet\n",
    "none": "",
    "Azure HC44rs (open-mpi/ompi#6723)": (DATA / "ibstatus_ibv_devinfo_azure-hc44rs_ompi-6723.txt").read_text(),
}


def launcher_infiniband_devices(listing: Path) -> list[str]:
    """The launcher's own `infiniband_devices` function, run with the patterns the job hands it."""
    script = LAUNCHER.read_text()
    (function,) = re.findall(r"^infiniband_devices\(\) \{\n.*?^\}\n", script, re.S | re.M)
    done = subprocess.run(["bash", "-c", function + 'infiniband_devices "$1"', "-", str(listing)],
                          env={**os.environ, **launcher_env.hca_listing_env()}, capture_output=True, text=True,
                          timeout=30, check=True)
    return done.stdout.split()


@pytest.mark.parametrize("name", HCA_LISTINGS)
def test_the_launcher_reads_a_hca_listing_as_verify_does(tmp_path, name):
    from verify import hca

    listing = tmp_path / "node.hca"
    listing.write_text(HCA_LISTINGS[name])
    ports = hca._ibstatus(HCA_LISTINGS[name].splitlines())  # the launcher prints the ibstatus form
    assert launcher_infiniband_devices(listing) == sorted({p.device for p in hca.infiniband_ports(ports)})


def test_the_hca_patterns_are_posix_eres_and_cover_each_case():
    python_only = re.compile(r"\\[dDsSwWbBAZ]|\(\?|\*\?|\+\?|\{")
    assert not any(python_only.search(v) for v in launcher_env.hca_listing_env().values())
    from verify import hca

    found = {name: sorted({p.device for p in hca.infiniband_ports(hca._ibstatus(text.splitlines()))})
             for name, text in HCA_LISTINGS.items()}
    assert found["with ND H200 v5's Ethernet mlx5_an0"] == ["mlx5_ib0"]
    assert found["an empty link layer (an unreadable file)"] == ["mlx5_ib0"]
    assert found["no link layer line"] == ["mlx5_ib1"]
    assert found["a block ended by another line"] == ["mlx5_ib0"]
    assert found["Azure HC44rs (open-mpi/ompi#6723)"] == ["mlx5_0"]
