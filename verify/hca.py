"""Parsers for a node's inventory: its InfiniBand HCA ports and its GPUs.

Formats handled:
- `ibstatus` (linux-rdma/rdma-core infiniband-diags/scripts/ibstatus), which prints the port's sysfs
  files (/sys/class/infiniband/DEV/ports/N/{state,phys_state,rate,link_layer}) under a header
  "Infiniband device 'DEV' port N status:". The fabric test's launcher prints the same block from
  sysfs itself (it needs no infiniband-diags), so one parser reads both;
- `ibv_devinfo` and `ibv_devinfo -v` (rdma-core libibverbs/examples/devinfo.c): `hca_id:`, `port:`,
  `state: PORT_ACTIVE (4)`, `link_layer:`, and with -v `phys_state:`, `active_width: 4X (2)`,
  `active_speed: 100.0 Gbps (64)` from which the rate follows (width x per-lane speed);
- `nvidia-smi -L`: one `GPU i: NAME (UUID: GPU-...)` line per GPU.

Only ports whose link layer is InfiniBand count as HCAs: ND H200 v5 VMs also show an Ethernet
`mlx5_an0` (accelerated networking) among their RDMA devices (Azure/azurehpc-health-checks@0e0a1ac
conf/nd96isr_h200_v5.conf: `check_hw_ib 100 mlx5_an0:1` next to eight `check_hw_ib 400 mlx5_ibN:1`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

INFINIBAND = "InfiniBand"
ACTIVE = "ACTIVE"
LINK_UP = "LinkUp"


@dataclass(frozen=True)
class HcaPort:
    device: str  # e.g. mlx5_ib0
    port: int
    state: str | None  # ACTIVE, DOWN, INIT, ARMED (the word, without sysfs' number)
    phys_state: str | None  # LinkUp, Polling, Disabled, ... (None: not in the listing)
    rate_gbits: float | None  # Gb/s (bits), e.g. 400 for "400 Gb/sec (4X NDR)"
    link_layer: str | None  # InfiniBand | Ethernet
    rate_text: str | None = None  # as printed, e.g. "400 Gb/sec (4X NDR)"

    @property
    def is_infiniband(self) -> bool:
        # An IB-only listing (old ibv_devinfo) may omit the link layer; IB is then what it is.
        return (self.link_layer or INFINIBAND) == INFINIBAND

    @property
    def name(self) -> str:
        return f"{self.device}:{self.port}"


def infiniband_ports(ports: tuple[HcaPort, ...] | list[HcaPort]) -> tuple[HcaPort, ...]:
    return tuple(p for p in ports if p.is_infiniband)


# --- ibstatus / sysfs -----------------------------------------------------------------------------
_IBSTATUS_HEAD = re.compile(r"^\s*Infiniband device '(?P<dev>[^']+)' port (?P<port>\d+) status:\s*$")
_IBSTATUS_FIELD = re.compile(r"^\s+(?P<key>[a-z_ ]+?):\s*(?P<value>.*?)\s*$")
# sysfs `state` is "4: ACTIVE", `phys_state` "5: LinkUp", `rate` "400 Gb/sec (4X NDR)"
_NUMBERED = re.compile(r"^\d+:\s*(\S+)")
_RATE = re.compile(r"^(?P<n>\d+(?:\.\d+)?)\s*Gb/sec")


def _word(value: str | None) -> str | None:
    if value is None:
        return None
    m = _NUMBERED.match(value)
    return m.group(1) if m else value.split()[0] if value.split() else None


def _ibstatus(lines: list[str]) -> list[HcaPort]:
    found: list[HcaPort] = []
    current: dict | None = None

    def close() -> None:
        if current is not None:
            rate = _RATE.match(current.get("rate") or "")
            found.append(HcaPort(
                device=current["dev"], port=current["port"],
                state=_word(current.get("state")), phys_state=_word(current.get("phys state")),
                rate_gbits=float(rate["n"]) if rate else None, link_layer=current.get("link_layer"),
                rate_text=current.get("rate"),
            ))

    for line in lines:
        head = _IBSTATUS_HEAD.match(line)
        if head:
            close()
            current = {"dev": head["dev"], "port": int(head["port"])}
            continue
        if current is None:
            continue
        field = _IBSTATUS_FIELD.match(line)
        if field:
            key = field["key"].replace("phys_state", "phys state")
            current[key] = field["value"]
        elif line.strip():  # anything else ends the block
            close()
            current = None
    close()
    return found


# --- ibv_devinfo ----------------------------------------------------------------------------------
_HCA_ID = re.compile(r"^\s*hca_id:\s*(\S+)")
_PORT = re.compile(r"^\s*port:\s*(\d+)\s*$")
_KV = re.compile(r"^\s*(state|phys_state|link_layer|active_width|active_speed):\s*(.*?)\s*$")
_PORT_STATE = re.compile(r"PORT_(\w+)")
_WIDTH = re.compile(r"(\d+)X")
_SPEED = re.compile(r"(\d+(?:\.\d+)?)\s*Gbps")


def _devinfo(lines: list[str]) -> list[HcaPort]:
    found: list[HcaPort] = []
    device: str | None = None
    port: dict | None = None

    def close() -> None:
        if port is None or device is None:
            return
        state = _PORT_STATE.search(port.get("state", ""))
        phys = port.get("phys_state")
        width = _WIDTH.search(port.get("active_width", ""))
        speed = _SPEED.search(port.get("active_speed", ""))
        rate = int(width.group(1)) * float(speed.group(1)) if width and speed else None
        found.append(HcaPort(
            device=device, port=port["port"], state=state.group(1) if state else None,
            phys_state=phys.split()[0] if phys else None,  # "LINK_UP (5)" -> LINK_UP
            rate_gbits=rate, link_layer=port.get("link_layer"),
            rate_text=f"{port['active_width']} x {port['active_speed']}" if rate else None,
        ))

    for line in lines:
        hca = _HCA_ID.match(line)
        if hca:
            close()
            device, port = hca.group(1), None
            continue
        p = _PORT.match(line)
        if p and device:
            close()
            port = {"port": int(p.group(1))}
            continue
        kv = _KV.match(line)
        if kv and port is not None:
            port[kv.group(1)] = kv.group(2)
    close()
    # ibv_devinfo -v spells the physical state LINK_UP; sysfs and ibstatus LinkUp: one spelling
    return [HcaPort(p.device, p.port, p.state, LINK_UP if p.phys_state == "LINK_UP" else p.phys_state,
                    p.rate_gbits, p.link_layer, p.rate_text) for p in found]


def parse_ports(text: str) -> tuple[HcaPort, ...]:
    """Every port listed in `text` (ibstatus/sysfs blocks, else ibv_devinfo). An empty listing is a
    result (no RDMA device visible), not an error: the launcher prints a marker even then."""
    lines = text.splitlines()
    ports = _ibstatus(lines) or _devinfo(lines)
    return tuple(ports)


# --- nvidia-smi -L --------------------------------------------------------------------------------
_GPU = re.compile(r"^\s*GPU (\d+): (.+?)(?: \(UUID: ([^)]+)\))?\s*$")


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    uuid: str | None


def parse_gpus(text: str) -> tuple[Gpu, ...]:
    """The GPUs `nvidia-smi -L` lists (MIG lines, indented `MIG ...`, are not GPUs)."""
    return tuple(Gpu(int(m.group(1)), m.group(2), m.group(3)) for m in map(_GPU.match, text.splitlines()) if m)
