"""The program in two parts, so that a private cluster can be deployed as two stacks of this project
(docs/enterprise-deployment.md): `azure` (feature registration, cluster, InfiniBand pool) and
`kubernetes` (operators, Volcano, the fabric test and its verdict), joined by `handoff` - the Azure
part's outputs that the Kubernetes part reads through a StackReference. `stackPart: all` (the
default) declares both in one stack, exactly as before the split.
"""
