"""Allreduces until killed (TestKilledRank)."""
from mpi4py import MPI
import numpy as np

w = MPI.COMM_WORLD
a, b = np.ones(1000), np.empty(1000)
while True:
    w.Allreduce(a, b)
