"""ibPool.rdmaDriver read per pool: the pool's record holds its driver (the refusals: tests/bad_configs)."""

from __future__ import annotations

import pytest
from conftest import dev_config

import stack_config
from core import rdma_drivers
from offline import engine
from tests.unit.core.test_rdma_drivers import ALLOWED


@pytest.mark.parametrize("size", sorted(ALLOWED))
def test_the_pool_holds_its_driver_record(size):
    cfg = stack_config.parse(engine.as_cli_config(dev_config(ibPool={"vmSize": size, "rdmaDriver": "inbox"})), "dev")
    assert cfg.ib_pool.rdma_driver is rdma_drivers.INBOX
    assert stack_config.parse(engine.as_cli_config(dev_config()), "dev").ib_pool.rdma_driver is rdma_drivers.DOCA
