"""The fabric test's cluster side: the code that reads or writes a Kubernetes cluster, on top of the pure
judge in `verify/` (which parses a log and judges it, and never imports this package).

- the collector (`collect`; `collect_cli` is `python -m verify collect`): waits for the Volcano job while
  saying what it waits for, reads the launcher's log, and gives up early when success is impossible: why
  (`diagnose`) from one read-only look at the cluster (`snapshot`), on the `kubernetes` package (`kube`:
  names, field facts and raw reads);
- the certifier (`certify` decides, `certify_kube` reads and writes, `certify_cli` is `python -m verify
  certify`, `certify_admit` holds new boots, `certify_recurring` re-tests idle nodes), on its own
  standard-library client (`kube_api`), so that its pods run on `python -S`;
- `wait_access`: waits until the deploying identity may act on the cluster.

The command line stays `python -m verify ...` (verify/__main__.py, the one module of `verify/` that
imports this package): users, the docs and the certifier's pods run it by that name.
"""
