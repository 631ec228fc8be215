"""The stack's typed configuration: every key, its type, default, description and check, in one table.

`load()` reads `Pulumi.<stack>.yaml` (through Pulumi's config), validates everything, and either
returns a frozen `StackConfig` or stops the program with one `pulumi.RunError` that lists every bad
key with the value received and what is allowed - before any resource is declared.
`parse()` does the same from a plain dict and is what the tests call.

The package, one job per module:
- `engine`: what a declared key is, how a raw value becomes its type, the one-line problems;
- `checks`: the checks of this stack's keys (pins are `core.pins`' predicates, shared with the
  component Args and the policy pack);
- `schema`: every key and the pinned versions (`SCHEMA`, `DEFAULT_VERSIONS`);
- `enterprise`: the platform-team keys' checks (CIDRs, Azure ids), cross-key rules and typed records;
- `pools`: the InfiniBand pools, `ibPool` or `ibPools`, each entry read and checked on its own, and the
  rules of several pools in one cluster;
- `model`: the typed result, `parse()`, `load()` and the rules that span several keys;
- `docs`: Pulumi.yaml's `config:` block and docs/configuration.md's key table, generated from `SCHEMA`
  (`make golden` writes them: offline/docblocks.py; a test keeps them in sync).

All sizing of the NCCL test (`-e` and the GPU memory it needs) is `core/nccl_sizing.py`.
"""

from stack_config.docs import TABLE_END, TABLE_START, markdown_table, pulumi_yaml, pulumi_yaml_config
from stack_config.engine import ConfigError, Key
from stack_config.model import FabricTest, IbPool, StackConfig, SystemPool, Versions, load, parse
from stack_config.schema import (
    DEFAULT_KUBERNETES_VERSION,
    DEFAULT_NCCL_TESTS_IMAGE,
    DEFAULT_VERSIONS,
    LOCATION_KEY,
    MAX_NODES,
    PROJECT,
    SCHEMA,
    SCHEMA_BY_NAME,
    VERSION_PINS,
)

__all__ = [
    "DEFAULT_KUBERNETES_VERSION", "DEFAULT_NCCL_TESTS_IMAGE", "DEFAULT_VERSIONS", "LOCATION_KEY", "MAX_NODES",
    "PROJECT", "SCHEMA", "SCHEMA_BY_NAME", "TABLE_END", "TABLE_START", "VERSION_PINS",
    "ConfigError", "FabricTest", "IbPool", "Key", "StackConfig", "SystemPool", "Versions", "load",
    "markdown_table", "parse", "pulumi_yaml", "pulumi_yaml_config",
]
