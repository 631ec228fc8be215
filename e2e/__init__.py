"""The real-control-plane tier: the pinned upstream Kubernetes programs (e2e/tools), run on loopback in a
network namespace of their own (e2e/cluster.py), AKS's documented node rules as admission policies
(e2e/aks_rules.py), the nodes of a stack's pools as AKS creates them (e2e/nodes.py), and the tests that
run the product against them (e2e/tests). docs/real-control-plane.md says what each proves."""
