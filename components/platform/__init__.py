"""The platform: the cluster, its InfiniBand pool and what runs the fabric on it (the operators, the DRA
drivers, Volcano, the topology labeler), with the helpers only they use (operator_release)."""
