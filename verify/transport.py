"""Which transport NCCL used, from its own INFO lines: the network, the HCAs, GPUDirect RDMA, and the
path of every inter-node connection.

The lines, with the NCCL source that prints them (NVIDIA/nccl, the same text at v2.18.3-1,
v2.21.5-1, v2.23.4-1, v2.26.2-1, v2.28.9-1 and v2.29.7-1 unless said):
- src/init.cc: "Using network %s" (comm->ncclNet->name: "IB", "Socket", or a plugin's name such as
  "IBext_v8" / "IBext_v11" from nccl-rdma-sharp-plugins; only "Socket" is TCP);
- src/transport/net_ib.cc (2.29: net_ib/init.cc): "NET/IB : Using%s %s; OOB %s:%s", the devices as
  " [%d]%s:%d/%s" (index, name, port, link layer IB or RoCE), then "[RO]" when relaxed ordering is
  on; "NET/IB : Using [RO]; OOB ..." lists none (2.28, seen in tests/data) and "NET/IB : No device
  found." says the same; src/transport/net_socket.cc: "NET/Socket : Using [0]eth0:ADDR";
- src/graph/topo.cc: "NET/%s : GPU Direct RDMA %s for HCA %d '%s'" (Enabled / Disabled: whether the
  driver can register GPU memory with that HCA, i.e. nvidia-peermem or dma-buf; line 1457 at v2.30.4-1);
- src/init.cc: "DMA-BUF is available on GPU device %d" (NCCL_INIT: the CUDA driver exports the GPU's memory as
  DMA-BUF and the network can register it; line 413 at v2.30.4-1, the same text from v2.18.3-1);
  src/graph/paths.cc: "GPU Direct RDMA Disabled for GPU ... (distance %d > %d)" (the GPU is too far
  from the NIC for NCCL_NET_GDR_LEVEL; 2.29 words it "... for GPU/%ld-%ld (rank %d) - NET/..."; from
  2.30.3 it is TRACE, never in an INFO log, and verify.verdict says so instead);
- src/transport/net.cc: "Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/%s/%d%s%s%s" (and
  "[receive]"), NET/<network>/<device index>, "(%d)" after the index when a proxy rank sends
  (PXN), then "/GDRDMA" when GPUDirect RDMA carries it ("(PCI)" after it on C2C systems) and
  "/Shared"; 2.18 prints the same without "(PCI)";
- src/transport/coll_net.cc: "CollNet %02d/%1d : %d [send] via COLLNET/%s/%d%s%s" (SHARP);
- src/init.cc from 2.20: "comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL %d"
  (older releases: the node count is the number of hosts that log);
- src/debug.cc: every "... NCCL WARN ..." line.
Line prefixes (mpirun's tag, NCCL's host:pid:tid) are `verify.loglines`' business. `parse` reads
any text: a whole launcher log or one section of it.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from verify import bounded
from verify.bounded import Kept
from verify.loglines import nccl_line, untag

SOCKET = "Socket"  # NCCL's built-in TCP network; every other name is an RDMA transport
_USING_NETWORK = re.compile(r"^Using network (.+?)\s*$")
_NET_USING = re.compile(r"^NET/(?P<net>[^ ]+) : Using(?P<devices>.*?)(?:; OOB .*)?$")
_IB_DEVICE = re.compile(r"\[\d+\](?P<name>[^\s:\[\]]+):\d+/(?P<link>IB|RoCE)\b")
_NO_IB_DEVICE = re.compile(r"^NET/IB : No device found")
_HCA_GDR = re.compile(r"^NET/(?P<net>[^ ]+) : GPU Direct RDMA (?P<state>Enabled|Disabled) for HCA \d+ '(?P<hca>[^']*)'")
_DMABUF_GPU = re.compile(r"^DMA-BUF is available on GPU device (?P<dev>\d+)")
_DISTANCE_GDR_OFF = re.compile(r"^GPU Direct RDMA Disabled for .*distance")
_CHANNEL = re.compile(
    r"^Channel \d+(?:/\d+)? : \d+\[[0-9a-fA-Fx]+\] -> \d+\[[0-9a-fA-Fx]+\] \[(?P<dir>send|receive)\] "
    r"via NET/(?P<net>[^/]+)/(?P<dev>\d+)(?:\(\d+\))?(?P<flags>\S*)"
)
_COLLNET = re.compile(
    r"^CollNet \d+/\d+ : \d+ \[(?P<dir>send|receive)\] via COLLNET/(?P<net>[^/]+)/(?P<dev>\d+)(?P<flags>\S*)"
)
_COMM = re.compile(
    r"^comm 0x[0-9a-fA-F]+ rank \d+ nRanks (?P<ranks>\d+) nNodes (?P<nodes>\d+) localRanks (?P<local>\d+)"
)
_PLUGIN = re.compile(r"^NET/Plugin ?: Loaded (?P<kind>net|coll|collnet) plugin (?P<name>.+?) \(v\d+\)")
WARNINGS_SHOWN = 50  # NCCL WARN lines kept in the JSON (all of them are counted)


def natural_key(text: str) -> tuple:
    """Sort key that puts "node-2" before "node-10"."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", text))


def channel_path(network: str, gdr: bool, collnet: bool = False) -> str:
    """How a connection is reported: "NET/IB/GDRDMA", "NET/IB", "NET/Socket", "COLLNET/SHARP/GDRDMA"
    (the device index is left out: the counts add up over the HCAs)."""
    return f"{'COLLNET' if collnet else 'NET'}/{network}" + ("/GDRDMA" if gdr else "")


@dataclass(frozen=True)
class Transport:
    """What NCCL's INFO lines say, per host. Empty fields: the lines were not in the log."""

    networks_by_host: dict[str, tuple[str, ...]] = field(default_factory=dict)  # "Using network X"
    hcas_by_host: dict[str, tuple[str, ...]] = field(default_factory=dict)  # NET/IB devices, link layer IB
    no_ib_device_hosts: tuple[str, ...] = ()  # "NET/IB : No device found"
    gdr_disabled_hcas_by_host: dict[str, tuple[str, ...]] = field(default_factory=dict)  # topo.cc "Disabled"
    gdr_distance_disabled_hosts: tuple[str, ...] = ()  # paths.cc: GPU too far from the NIC
    gdr_enabled_hcas_by_host: dict[str, tuple[str, ...]] = field(default_factory=dict)  # topo.cc "Enabled"
    dmabuf_gpus_by_host: dict[str, tuple[int, ...]] = field(default_factory=dict)  # init.cc "DMA-BUF is available"
    # every inter-node connection end ([send] and [receive] lines), by path, and by host and path
    channels_by_host: dict[str, dict[str, int]] = field(default_factory=dict)
    nodes: int | None = None  # nNodes of the "comm ... nNodes" lines (2.20+)
    local_ranks: int | None = None  # the largest localRanks
    ranks: int | None = None  # nRanks
    plugins: tuple[str, ...] = ()  # "net IBext_v8", "collnet SHARP": plugins NCCL loaded
    warnings: tuple[str, ...] = ()  # the NCCL WARN lines, as printed (the first verify.bounded.LINES)
    warnings_total: int = 0  # every WARN line, those not kept too (0: as many as `warnings`)
    hosts: tuple[str, ...] = ()  # every host that printed an NCCL line (natural order: node-2 < node-10)

    # ---- derived -------------------------------------------------------------------------------
    @property
    def seen(self) -> bool:
        """Whether the log says anything about the transport (NCCL_DEBUG=INFO with INIT,NET)."""
        return bool(self.networks_by_host or self.hcas_by_host or self.channels_by_host or self.no_ib_device_hosts)

    @property
    def warning_count(self) -> int:
        return max(self.warnings_total, len(self.warnings))

    @property
    def networks(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(n for names in self.networks_by_host.values() for n in names))

    @property
    def network(self) -> str | None:
        """The one network every rank selected; "mixed: A, B" when they differ; None when not logged."""
        names = self.networks
        if not names:
            return None
        return names[0] if len(names) == 1 else "mixed: " + ", ".join(names)

    @property
    def inter_node_channels(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for paths in self.channels_by_host.values():
            total.update(paths)
        return dict(sorted(total.items()))

    @property
    def socket_hosts(self) -> tuple[str, ...]:
        """Hosts whose ranks selected the Socket network or sent an inter-node connection over it."""
        socket_paths = {channel_path(SOCKET, False), channel_path(SOCKET, True)}
        return tuple(
            h for h in self.hosts
            if SOCKET in self.networks_by_host.get(h, ()) or socket_paths & set(self.channels_by_host.get(h, {}))
        )

    @property
    def rdma_channels(self) -> dict[str, int]:
        """The inter-node connection ends that did not go over sockets."""
        return {p: n for p, n in self.inter_node_channels.items() if p.split("/")[1] != SOCKET}

    @property
    def gdr(self) -> bool | None:
        """True when every RDMA inter-node connection used GPUDirect RDMA, False when one did not,
        None when there was none (single node, sockets only, or not logged)."""
        rdma = self.rdma_channels
        if not rdma:
            return None
        return all(p.endswith("/GDRDMA") for p in rdma)

    def hosts_without_gdr(self) -> tuple[str, ...]:
        return tuple(
            h for h, paths in self.channels_by_host.items()
            if any(p.split("/")[1] != SOCKET and not p.endswith("/GDRDMA") for p in paths)
        )

    def summary(self, nodes: int | None = None) -> str:
        """One line for people (the stack's `fabricTransport`): "NET/IB GDRDMA, 8 HCAs per node"."""
        if not self.seen:
            return "not in the log (NCCL_DEBUG=INFO with NCCL_DEBUG_SUBSYS=INIT,NET shows it)"
        nodes = nodes or self.nodes or len(self.hosts)
        if not self.channels_by_host:
            if nodes and nodes < 2:
                return f"no inter-node channel (single node; network {self.network or 'not logged'})"
            return f"no inter-node channel in the log (network {self.network or 'not logged'})"
        parts = [", ".join(f"{p} x{n}" for p, n in self.inter_node_channels.items())]
        if self.socket_hosts:
            parts[0] = f"TCP sockets, not RDMA ({parts[0]})"
        elif self.gdr is True:
            parts[0] = " + ".join(sorted({p.rsplit('/', 1)[0] for p in self.rdma_channels})) + " GDRDMA"
        elif self.gdr is False:
            parts[0] = f"RDMA without GPUDirect ({parts[0]})"
        counts = sorted({len(v) for v in self.hcas_by_host.values()})
        if counts and counts[-1]:
            spread = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
            parts.append(f"{spread} HCAs per node")
        return ", ".join(parts)

    def as_dict(self, nodes: int | None = None) -> dict:
        """The JSON block `transport` (keys are public API)."""
        return {
            "summary": self.summary(nodes),
            "network": self.network,
            "gdr": self.gdr,
            "hcas_by_host": {h: list(v) for h, v in self.hcas_by_host.items()},
            "inter_node_channels": self.inter_node_channels,
            "nodes": self.nodes,
            "local_ranks": self.local_ranks,
            "plugins": list(self.plugins),
            "nccl_warnings": list(self.warnings[:WARNINGS_SHOWN]),
            "nccl_warnings_total": self.warning_count,
        }


class Collector:
    """Reads lines one at a time (so that `verify.nccl` feeds it from its own pass over the log)."""

    def __init__(self) -> None:  # every field is bounded by the hosts, paths and names, not by the lines
        self._hosts: dict[str, None] = {}
        self._networks: dict[str, dict[str, None]] = defaultdict(dict)
        self._hcas: dict[str, dict[str, None]] = {}
        self._no_ib: dict[str, None] = {}
        self._gdr_off: dict[str, dict[str, None]] = defaultdict(dict)
        self._gdr_on: dict[str, dict[str, None]] = defaultdict(dict)
        self._dmabuf: dict[str, dict[int, None]] = defaultdict(dict)
        self._distance_off: dict[str, None] = {}
        self._channels: dict[str, Counter[str]] = defaultdict(Counter)
        self._plugins: dict[str, None] = {}
        self._warnings: Kept[str] = Kept(bounded.LINES, "NCCL WARN lines")
        self._nodes: int | None = None
        self._local: int | None = None
        self._ranks: int | None = None

    def feed(self, line: str) -> None:
        """One line of the log; mpirun's tag may still be on it."""
        line = untag(line)
        parsed = nccl_line(line)
        if parsed is None:
            if "NCCL WARN" in line:  # a WARN whose prefix is not NCCL's usual one
                self._warnings.append(line.strip())
            return
        host, message = parsed.host, parsed.message
        self._hosts.setdefault(host)
        if parsed.level == "WARN":
            self._warnings.append(parsed.text)
            return
        if m := _CHANNEL.match(message) or _COLLNET.match(message):
            gdr = "GDRDMA" in m["flags"]
            self._channels[host][channel_path(m["net"], gdr, collnet=message.startswith("CollNet"))] += 1
        elif m := _USING_NETWORK.match(message):
            self._networks[host].setdefault(m[1])
        elif m := _HCA_GDR.match(message):
            if m["net"] != SOCKET:
                for name in m["hca"].split("+"):  # a merged device, as in "NET/IB : Using"
                    (self._gdr_off if m["state"] == "Disabled" else self._gdr_on)[host].setdefault(name)
        elif m := _DMABUF_GPU.match(message):
            self._dmabuf[host].setdefault(int(m["dev"]))
        elif _NO_IB_DEVICE.match(message):
            self._no_ib.setdefault(host)
            self._hcas.setdefault(host, {})
        elif (m := _NET_USING.match(message)) and m["net"] == "IB":
            names = self._hcas.setdefault(host, {})
            for dev in _IB_DEVICE.finditer(m["devices"]):
                if dev["link"] == "IB":
                    for name in dev["name"].split("+"):  # "mlx5_0+mlx5_1": NCCL merged two ports
                        names.setdefault(name)
        elif _DISTANCE_GDR_OFF.match(message):
            self._distance_off.setdefault(host)
        elif m := _COMM.match(message):
            self._nodes = max(self._nodes or 0, int(m["nodes"]))
            self._local = max(self._local or 0, int(m["local"]))
            self._ranks = max(self._ranks or 0, int(m["ranks"]))
        elif m := _PLUGIN.match(message):
            kind = "net" if m["kind"] == "net" else "collnet"
            self._plugins.setdefault(f"{kind} {m['name']}")

    def result(self) -> Transport:
        def by_host(d: dict) -> list:  # node-2 before node-10
            return sorted(d.items(), key=lambda kv: natural_key(kv[0]))

        return Transport(
            networks_by_host={h: tuple(v) for h, v in by_host(self._networks)},
            hcas_by_host={h: tuple(v) for h, v in by_host(self._hcas)},
            no_ib_device_hosts=tuple(sorted(self._no_ib, key=natural_key)),
            gdr_disabled_hcas_by_host={h: tuple(v) for h, v in by_host(self._gdr_off) if v},
            gdr_distance_disabled_hosts=tuple(sorted(self._distance_off, key=natural_key)),
            gdr_enabled_hcas_by_host={h: tuple(v) for h, v in by_host(self._gdr_on) if v},
            dmabuf_gpus_by_host={h: tuple(sorted(v)) for h, v in by_host(self._dmabuf) if v},
            channels_by_host={h: dict(sorted(c.items())) for h, c in by_host(self._channels)},
            nodes=self._nodes,
            local_ranks=self._local,
            ranks=self._ranks,
            plugins=tuple(self._plugins),
            warnings=tuple(self._warnings.items),
            warnings_total=len(self._warnings) + self._warnings.dropped,
            hosts=tuple(sorted(self._hosts, key=natural_key)),
        )


def parse_lines(lines: Iterable[str]) -> Transport:
    collector = Collector()
    for line in lines:
        collector.feed(line)
    return collector.result()


def parse(text: str) -> Transport:
    """The transport that `text` (a launcher log, or one section of it) records."""
    return parse_lines(text.splitlines())
