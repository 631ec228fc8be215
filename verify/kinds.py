"""The two kinds of fabric-test result `python -m verify` reads, as `--kind` names them and as the
JSON's `kind` key reports them. The stack's collect step passes the kind of the job it created."""

NCCL = "nccl"  # nccl-tests all_reduce_perf across the GPU nodes (verify/nccl.py, verify/verdict.py)
P2P = "p2p"  # OSU osu_bw / osu_latency or perftest between two CPU-only HB / HX nodes (verify/p2p.py)
KINDS = (NCCL, P2P)
