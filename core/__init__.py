"""Pure rules below every layer: the SKU catalog, the fabric contract, what a pin looks like.

Nothing here imports pulumi, components, stack_config, verify, offline or policy
(tests/tooling/test_imports.py checks it), so every layer can read the same facts.
"""
