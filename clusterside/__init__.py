"""The fabric test's cluster side: the code that reads or writes a Kubernetes cluster, on top of the pure
judge in `verify/` (which parses a log and judges it, and never imports this package).

- the collector (`collect`; `collect_cli` is `python -m verify collect`): waits for the Volcano job while
  saying what it waits for, reads the launcher's log, and gives up early when success is impossible: why
  (`diagnose`) from one read-only look at the cluster (`snapshot`; `kube`: names, field facts and reads);
- the certifier (`certify` decides, `certify_kube` reads and writes, `certify_cli` is `python -m verify
  certify`, `certify_admit` holds new boots, `certify_recurring` re-tests idle nodes);
- `wait_access`: waits until the deploying identity may act on the cluster.

All on one Kubernetes client, `kube_api`, in the standard library only, so that the certifier's pods run
on `python -S`; where a person or the stack signs in (the collector, wait-access) it also runs an exec
credential plugin (kubelogin, on Entra ID clusters).

The command line stays `python -m verify ...` (verify/__main__.py, the one module of `verify/` that
imports this package): users, the docs and the certifier's pods run it by that name.
"""
