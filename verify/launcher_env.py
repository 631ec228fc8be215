"""What the launcher's shell matches and compares, handed over as environment values, so that
scripts/nccl-launcher.sh holds no parsing or transport rule of its own: it runs awk
programs that know no format, with the patterns below.

The test image need not have python3 (docs/fabric-doctor.md, "No Python in the pod"), so the pod
cannot run verify itself; every pattern is a POSIX ERE (no \\d, \\s, lookarounds or non-capturing
groups) that awk and Python's `re` read the same way, written from verify's own definitions:
`verify.loglines` (the line prefixes, the row's first columns), `verify.nccl` (a result row),
`verify.transport` and `verify.verdict` (the INFO messages they read, the transport rules of the
all-nodes verdict), `verify.hca` (which ports of a node's HCA listing are InfiniBand).
tests/unit/verify/test_doctor_launcher_rules.py checks each against those parsers on recorded logs and listings.
"""

from __future__ import annotations

from verify.hca import INFINIBAND
from verify.loglines import HOST_ERE, NCCL_PREFIX_ERE, ROW_COLUMNS_ERE, TAG_ERE

# --- the log filter -----------------------------------------------------------------------------
# The INFO messages verify reads, kept once per host (verify/transport.py lists their NCCL sources):
# the versions, the network, the HCAs, GPUDirect RDMA, the plugins, the comm's rank/node counts.
KEEP_INFO_ERE = (r"^(NCCL version |Using network |NET/[^ ]+ : Using|NET/IB : No device found|NET/Plugin|"
                 r"comm 0x[0-9a-f]+ rank [0-9]+ nRanks [0-9]+ nNodes )|GPU Direct RDMA")
# "DMA-BUF is available on GPU device N" (verify/dmabuf.py), kept where the verdict needs it: a GPU pool without
# peer memory (core/rdma_drivers.py gdr_via_dmabuf), so the filter of every other pool stays as it was.
KEEP_DMABUF_ERE = r"^DMA-BUF is available on GPU device "
# An inter-node connection ("[send] via NET/IB/0/GDRDMA", CollNet's "[send] via COLLNET/..."): each is
# its own channel, so the all-nodes run keeps every one (the doctor's runs one per host and path).
CONNECTION_ERE = r"\[(send|receive)\] via "
# An INFO line's start: "HOST:PID:TID [DEV] NCCL INFO " (verify.loglines; a WARN has FILE:LINE too).
INFO_ERE = HOST_ERE + r":[0-9]+:[0-9]+ \[[0-9]+\] NCCL INFO "


def log_filter_env(dmabuf: bool = False) -> dict[str, str]:
    """The filter's patterns (the all-nodes run's output, and `--condense-nccl-log`); `dmabuf`: keep NCCL's
    DMA-BUF lines too."""
    return {
        "LOG_TAG_ERE": TAG_ERE,  # mpirun --tag-output's "[JOB,RANK]<stdout>:"
        "LOG_ROW_ERE": ROW_COLUMNS_ERE,  # an nccl-tests row's first columns (an NCCL line may follow)
        "LOG_NCCL_LINE_ERE": NCCL_PREFIX_ERE,  # where one of NCCL's INFO/WARN lines starts
        "LOG_NCCL_INFO_ERE": INFO_ERE,  # where an INFO line's message starts
        "LOG_NCCL_HOST_ERE": HOST_ERE,  # its host, the first thing in it
        "LOG_NCCL_KEEP_ERE": f"{KEEP_INFO_ERE}|{KEEP_DMABUF_ERE}" if dmabuf else KEEP_INFO_ERE,
        "LOG_NCCL_CONNECTION_ERE": CONNECTION_ERE,
    }


# --- a result row (verify.nccl: size count type redop root, then time algbw busbw #wrong out of
# place and in place) --------------------------------------------------------------------------
NUMBER_ERE = r"([-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?|-?[nN][aA][nN]|[iI][nN][fF]|N/A)"
_WRONG_OK_ERE = r"(0|N/A)"  # #wrong: none, or not checked (verify.nccl._wrong)
_GAP = r"[ \t]+"


def _row(wrong: str) -> str:
    measured = _GAP.join([NUMBER_ERE, NUMBER_ERE, NUMBER_ERE, wrong])
    return ROW_COLUMNS_ERE + _GAP + measured + _GAP + measured + r"[ \t]*$"


ROW_ERE = _row(NUMBER_ERE)  # any whole row
ROW_OK_ERE = _row(_WRONG_OK_ERE)  # a row with no wrong element
ROW_SIZE_FIELD, ROW_BUSBW_FIELD = 1, 8  # awk's $1 and $8: the size, the out-of-place busbw


def result_env() -> dict[str, str]:
    """How the launcher reads a run's busbw at its largest size (the auto decision, a slow pair):
    the row of the largest size among ROW_ERE's, none when a row has #wrong > 0 (verify.doctor's
    `sections.nccl_figure` reads it so)."""
    return {"LOG_RESULT_ROW_ERE": ROW_ERE, "LOG_RESULT_OK_ERE": ROW_OK_ERE,
            "LOG_RESULT_FIELDS": f"{ROW_SIZE_FIELD} {ROW_BUSBW_FIELD}"}


# --- the all-nodes verdict's transport rules, for `auto` (verify.verdict) -------------------------
SOCKETS = "allreduce-sockets"
NO_GDRDMA = "allreduce-no-gdrdma"
FEWER_HCAS = "allreduce-fewer-hcas"
_SOCKET_ERE = r" NCCL INFO (Using network Socket[ \t]*$|.*\] via NET/Socket/)"
# an RDMA connection without "/GDRDMA" after its device index (and PXN's "(proxy rank)");
# "/Shared" may follow. NET/Socket matches too, but the Socket rule comes first.
_NO_GDR_ERE = r" NCCL INFO .*\[(send|receive)\] via (NET|COLLNET)/[^/ ]+/[0-9]+(\([0-9]+\))?(/Shared)?([ \t]|$)"
_NET_IB_USING_ERE = r" NCCL INFO NET/IB : Using"
_NO_IB_DEVICE_ERE = r" NCCL INFO NET/IB : No device found"
# an InfiniBand HCA in that line: " [0]mlx5_ib0:1/IB", each name of a merged "[0]mlx5_0+mlx5_1:1/IB"
# (verify.transport counts names, link layer IB only)
_IB_NAME_ERE = r"[^]+ \t:[]+(\+|:[0-9]+/IB)"


def transport_rules(expects_gdr: bool, hcas_per_node: int | None) -> str:
    """DOCTOR_RUN_IF: one rule a line, the first that holds names the reason. A rule is
    `reason<TAB>ERE`: a line of the run matches; or `reason<TAB>ERE<TAB>ITEM<TAB>MIN`: a line matches
    ERE with fewer than MIN matches of ITEM in it. In verify.verdict's order: TCP sockets (FAIL), an
    RDMA connection without GPUDirect RDMA where the size expects it (FAIL), a host that opened fewer
    InfiniBand HCAs than the size has (WARN)."""
    rules = [(SOCKETS, _SOCKET_ERE)]
    if expects_gdr:
        rules.append((NO_GDRDMA, _NO_GDR_ERE))
    if hcas_per_node:
        rules.append((FEWER_HCAS, _NET_IB_USING_ERE, _IB_NAME_ERE, str(hcas_per_node)))
        rules.append((FEWER_HCAS, _NO_IB_DEVICE_ERE))  # none at all (verify.transport counts it as 0)
    return "\n".join("\t".join(r) for r in rules)


# --- a node's HCA listing ------------------------------------------------------------------------
# The launcher prints each worker's HCA ports from sysfs in ibstatus' format, which verify/hca.py parses
# for the verdict; the doctor's per-HCA ib_write_bw needs the InfiniBand devices of that listing, in the
# pod without Python. verify.hca's rule as patterns: a port's header, the device name after its prefix,
# a field line (any other non-blank line ends the port's block), the link_layer line, and what follows it
# on an InfiniBand port: InfiniBand, or nothing (a port whose link layer is empty or not listed counts as
# InfiniBand, as verify.hca.HcaPort.is_infiniband reads it).
HCA_PORT_ERE = r"^[ \t]*Infiniband device '[^']+' port [0-9]+ status:[ \t]*$"
HCA_DEVICE_PREFIX_ERE = r"^[ \t]*Infiniband device '"
HCA_DEVICE_ERE = r"^[^']+"
HCA_FIELD_ERE = r"^[ \t]+[a-z_ ]+:"
HCA_LINK_LAYER_ERE = r"^[ \t]+link_layer:[ \t]*"
HCA_INFINIBAND_ERE = rf"^({INFINIBAND})?[ \t]*$"


def hca_listing_env() -> dict[str, str]:
    """The HCA listing's patterns, named as scripts/nccl-launcher.sh reads them."""
    return {"HCA_PORT_ERE": HCA_PORT_ERE, "HCA_DEVICE_PREFIX_ERE": HCA_DEVICE_PREFIX_ERE,
            "HCA_DEVICE_ERE": HCA_DEVICE_ERE, "HCA_FIELD_ERE": HCA_FIELD_ERE, "HCA_LINK_LAYER_ERE": HCA_LINK_LAYER_ERE,
            "HCA_INFINIBAND_ERE": HCA_INFINIBAND_ERE}


def shell_records(expects_gdr: bool = True, hcas_per_node: int | None = 8) -> str:
    """Every value above as `KEY=value` records ended by NUL (values hold tabs and newlines), for a
    script that runs the launcher outside the job (tests/data/recording/): `while IFS= read -r -d ''
    kv; do export "$kv"; done < <(python3 -m verify.launcher_env)`."""
    env = {**log_filter_env(), **result_env(), "DOCTOR_RUN_IF": transport_rules(expects_gdr, hcas_per_node),
           **hca_listing_env()}
    return "".join(f"{k}={v}\0" for k, v in env.items())


if __name__ == "__main__":
    import sys

    sys.stdout.write(shell_records())
