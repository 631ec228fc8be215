"""What an hour of a VM size costs, as data with its date and source (the stack's estimatedCostPerHour).

Pure Python. Not hardware: its own module, apart from the SKU catalog (core/catalog.py), whose size
matching it shares.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.catalog import size_key

# Pay-as-you-go Linux prices in a US region; an estimate, never a bill. Sizes without an entry make
# the estimate say "unknown" rather than guess. Check today's price: docs/enterprise-deployment.md.
SRC_PRICES_SKYPILOT = ("Azure Retail Prices API via SkyPilot's catalog fetcher "
                       "(skypilot-org/skypilot@40654dd sky/catalog/data_fetchers/fetch_azure.py)")


@dataclass(frozen=True)
class HourlyPrice:
    usd_per_hour: float
    read_on: str  # when the price was read (YYYY-MM)
    source: str


PRICES: dict[str, HourlyPrice] = {
    "Standard_ND96isr_H100_v5": HourlyPrice(117.98, "2023-12", SRC_PRICES_SKYPILOT),
    "Standard_D4s_v5": HourlyPrice(0.19, "2023-12", SRC_PRICES_SKYPILOT),
}


def hourly_price(vm_size: str) -> HourlyPrice | None:
    """The price of `vm_size` (matched as `lookup` matches sizes), or None where the catalog has none."""
    return next((p for name, p in PRICES.items() if size_key(name) == size_key(vm_size)), None)


def cost_per_hour(pools: dict[str, tuple[str, int]]) -> dict[str, object]:
    """An estimate of what the VMs of `pools` (name -> (size, nodes)) cost an hour: per pool and in
    total, with each price's date and source; a pool of 0 nodes costs 0 whatever its size. Disks,
    traffic and the control plane tier are left out. Unknown where a pool's size has no price."""
    out: dict[str, object] = {}
    total: float | None = 0.0
    prices = {}
    for pool, (size, nodes) in pools.items():
        price = hourly_price(size)
        usd = 0.0 if nodes == 0 else (round(price.usd_per_hour * nodes, 2) if price else None)
        out[f"{pool}Usd"] = usd
        total = None if usd is None or total is None else round(total + usd, 2)
        prices[size] = ({"usdPerHour": price.usd_per_hour, "readOn": price.read_on, "source": price.source}
                        if price else "no price in the catalog")
    out["totalUsd"] = total
    out["prices"] = prices
    out["excludes"] = "disks, traffic, the AKS control plane tier"
    return out
