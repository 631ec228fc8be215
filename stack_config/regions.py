"""Azure's regions, by the programmatic name `azure-native:location` takes.

Source: Microsoft Learn, "Azure regions list" (learn.microsoft.com/azure/reliability/regions-list,
column "Programmatic name"), cross-checked with `az account list-locations -o table` output and the
Azure SDK's `AzureLocation` names; read 2026-12-01. Sovereign clouds (Azure Government, Azure operated
by 21Vianet) are listed too: their names are as real, their clouds are separate.

Whether a size such as ND H100 v5 is offered in a region is NOT checked here. Azure publishes it per
subscription, not as a fixed list: `az vm list-skus --location <region> --size Standard_ND --output table`
shows the sizes and any restriction on the caller's subscription, and quota is a second gate. A table
here would be wrong for someone; a size missing in a region fails at the node pool's creation, with
Azure's own message. docs/configuration.md says how to check first.
"""

from __future__ import annotations

import difflib

SOURCE = "Microsoft Learn 'Azure regions list' (learn.microsoft.com/azure/reliability/regions-list), read 2026-12-01"

PUBLIC = (
    "australiacentral", "australiacentral2", "australiaeast", "australiasoutheast", "austriaeast",
    "belgiumcentral", "brazilsouth", "brazilsoutheast", "canadacentral", "canadaeast", "centralindia",
    "centralus", "centraluseuap", "chilecentral", "eastasia", "eastus", "eastus2", "eastus2euap",
    "francecentral", "francesouth", "germanynorth", "germanywestcentral", "indonesiacentral", "israelcentral",
    "italynorth", "japaneast", "japanwest", "jioindiacentral", "jioindiawest", "koreacentral", "koreasouth",
    "malaysiawest", "mexicocentral", "newzealandnorth", "northcentralus", "northeurope", "norwayeast",
    "norwaywest", "polandcentral", "qatarcentral", "southafricanorth", "southafricawest", "southcentralus",
    "southeastasia", "southindia", "spaincentral", "swedencentral", "swedensouth", "switzerlandnorth",
    "switzerlandwest", "uaecentral", "uaenorth", "uksouth", "ukwest", "westcentralus", "westeurope",
    "westindia", "westus", "westus2", "westus3",
)
SOVEREIGN = (
    "usgovarizona", "usgovtexas", "usgovvirginia", "usdodcentral", "usdodeast",  # Azure Government
    "chinaeast", "chinaeast2", "chinaeast3", "chinanorth", "chinanorth2", "chinanorth3",  # 21Vianet
)
REGIONS = frozenset(PUBLIC + SOVEREIGN)


def _squash(text: str) -> str:
    return "".join(c for c in text.lower() if c.isalnum())


def problem(value: object) -> str | None:
    """None for a known region, else what is allowed (with the closest names)."""
    if isinstance(value, str) and value.lower() in REGIONS:  # ARM reads names without case: EastUS is eastus
        return None
    if isinstance(value, str) and _squash(value) in REGIONS:  # "East US", "East-US 2"
        return f"the programmatic name {_squash(value)!r}, not the display name"
    close = difflib.get_close_matches(_squash(value), sorted(REGIONS), n=3, cutoff=0.75) if isinstance(
        value, str) and 0 < len(value) < 100 else []
    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
    return (f"an Azure region's programmatic name such as eastus{hint}; the list is in stack_config/regions.py, "
            f"from {SOURCE}: add a region opened since")
