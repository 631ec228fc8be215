"""`python -m verify wait-access`: wait until the identity running `pulumi up` may act on the cluster.

Azure RBAC role assignments take effect after a delay (up to minutes), so a Kubernetes provider created
right after the deployer's Cluster Admin assignment gets 403s. The stack runs this between the two
(components/platform/cluster.py): it asks the API server, as the deployer, whether it may create namespaces (a
SelfSubjectAccessReview, which every authenticated identity may send) every `--poll-seconds` until yes,
for at most `--timeout-minutes`. The kubeconfig comes in $KUBECONFIG_JSON (the stack's, as JSON); its user
is kubelogin's exec credential, run as kubectl runs it. Exit 0: allowed; 2: not within the time (one line).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from clusterside.kube_api import Api, ApiError, from_kubeconfig

REVIEW = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


def add_parser(sub) -> None:
    p = sub.add_parser("wait-access", help="wait until the kubeconfig's identity may create namespaces "
                                           "(an Azure RBAC assignment taking effect)")
    p.add_argument("--timeout-minutes", type=float, default=10.0)
    p.add_argument("--poll-seconds", type=float, default=10.0)


def allowed(api: Api) -> tuple[bool, str]:
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
              "spec": {"resourceAttributes": {"verb": "create", "resource": "namespaces"}}}
    status = api.post(REVIEW, review).get("status") or {}
    return bool(status.get("allowed")), str(status.get("reason") or "not allowed yet")


def run(args: argparse.Namespace, sleep=time.sleep, now=time.monotonic) -> int:
    text = os.environ.get("KUBECONFIG_JSON")
    if not text:
        print("error: $KUBECONFIG_JSON is empty: the stack passes the cluster's kubeconfig there", file=sys.stderr)
        return 2
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        f.write(text)
    try:
        api = Api(from_kubeconfig(f.name, allow_exec=True))
        start = now()
        while True:
            try:
                ok, why = allowed(api)
            except ApiError as exc:  # 401/403 while the assignment propagates, or the API not answering yet
                ok, why = False, str(exc)
            if ok:
                print(f"[verify wait-access] allowed after {now() - start:.0f}s", file=sys.stderr)
                return 0
            if now() - start + args.poll_seconds > args.timeout_minutes * 60:
                print(f"error: the deployer may still not create namespaces after {args.timeout_minutes:g} min "
                      f"({why}): check its Azure Kubernetes Service RBAC Cluster Admin assignment", file=sys.stderr)
                return 2
            print(f"[verify wait-access] not yet ({why}); again in {args.poll_seconds:g}s", file=sys.stderr, flush=True)
            sleep(args.poll_seconds)
    except ApiError as exc:  # named as the user gave it: $KUBECONFIG_JSON, not this temporary file
        print(f"error: {str(exc).replace(f'--kubeconfig {f.name}', '$KUBECONFIG_JSON')}", file=sys.stderr)
        return 2
    finally:
        os.unlink(f.name)
