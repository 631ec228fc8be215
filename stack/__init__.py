"""The assembly: the program's resources, declared from the typed configuration (stack_config) with the
components, one module per feature. Two halves, so that a private cluster can be deployed as two stacks
of this project (docs/enterprise-deployment.md): `azure` (feature registration, cluster, InfiniBand pool)
and `kubernetes` (the operators and Volcano, the fabric test of the size's kind with its verdict, the
GB200/GB300 rack's NVLink run), joined by `handoff` - the Azure half's outputs that the Kubernetes half
reads through a StackReference. `stackPart: all` (the default) declares both in one stack.
"""
