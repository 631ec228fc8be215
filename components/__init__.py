"""The stack's components, one per file, each `(name, args, opts=None)` with a typed args class: the platform
(components/platform/: the cluster, the operators, Volcano, the labeler) and the fabric test and its verdict
(components/fabric/: the jobs, the collect step, the certifier), with the one helper both use here (namespace.py).
The platform does not import the fabric test (tests/tooling/test_imports.py)."""
