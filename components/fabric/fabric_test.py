"""What the collect step needs of a fabric-test job, whatever its kind (core/kinds.py).

- `FabricTestJob`: the small protocol both jobs (`NcclJob`, `P2pJob`) implement, so `FabricCheck`
  takes the job itself;
- `number_arg`: a number as the job's environment and the collector's command line carry it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pulumi

    from core.catalog import Sku
    from core.kinds import Kind


def number_arg(value: float | None) -> str:
    """A number as the job's env or the collector's command line carries it: exact (Python's shortest
    form that reads back as the same float, so the launcher and the collector compare against the very
    line the verdict uses), whole numbers without ".0"; "" for None (the launcher reads it as unknown)."""
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


class FabricTestJob(Protocol):
    """What the collect step needs of a fabric test job (NcclJob, P2pJob)."""

    kind: Kind
    sku: Sku
    namespace_name: str
    job_name: str  # the Volcano Job's name: its spec's hash included (mpi_job.hashed_name)
    node_count: int  # the nodes the test spans
    # the pods' deadline: fabricTest.timeoutMinutes, plus the doctor's budget (doctorMinutes) when it may run
    deadline_minutes: int
    sharp: bool  # the all-reduce ran with SHARP/CollNet (fabricTest.sharp); always False for point to point
    rack_run: bool  # the rack's NVLink run of a GB200/GB300 size (NcclJobArgs.rack_run); False for point to point
    spec_sha256: str  # changes exactly when the job is replaced: the collect step's trigger
    # What the certifier's recurring runs and admission loop re-run of it (a Volcano Job template); None
    # where its kind does not re-test (Kind.retests; the stack holds the two equal), and for the rack's run
    retest: Mapping[str, Any] | None
    job: pulumi.Resource  # what the collect step waits for
