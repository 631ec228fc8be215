"""The fabric test and its verdict: the NCCL and point-to-point jobs on the shared MPI job, their DRA
claims, NCCL settings and topology, the image pre-pull, and the in-cluster certifier that judges them."""
