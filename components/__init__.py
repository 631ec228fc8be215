"""The stack's components, one per file, each `(name, args, opts=None)` with a typed args class."""
