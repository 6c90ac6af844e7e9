"""A program with a known fault, for the doctor's tests
(interpose/pmpi/doctor_test.go, docs/doctor.md).

    hang.py FAULT RANK AT [ITERS]

Every rank calls Allreduce of 1024 float64s ITERS times (default 10) on
COMM_WORLD, with nothing else collective on it. At the AT-th call
(1-based: seq AT-1 in the trace) rank RANK, per FAULT:

  hang      stops for good (sleeps) before it
  bcast     calls Bcast of the same buffer from rank 0 instead
  size      calls Allreduce of 512 float64s instead
  op        calls Allreduce with MPI.MAX instead of MPI.SUM
  raise     raises an exception before it
  exit      exits with status 3 before it, without MPI_Finalize
  none      does nothing wrong

and with pickled objects (every rank calls comm.allreduce(i), which
mpi4py makes of point-to-point messages and broadcasts on a duplicate of
COMM_WORLD):

  phang     stops for good before the AT-th
  pbcast    calls comm.bcast(i) on COMM_WORLD instead
"""
import os
import sys
import time
from array import array

from mpi4py import MPI

fault, bad, at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
iters = int(sys.argv[4]) if len(sys.argv) > 4 else 10

w = MPI.COMM_WORLD
rank = w.Get_rank()
a, b = array("d", [float(rank)] * 1024), array("d", [0.0] * 1024)
half_a, half_b = array("d", a[:512]), array("d", [0.0] * 512)
pickled = fault.startswith("p")
for i in range(1, iters + 1):
    time.sleep(0.01)
    if pickled:
        if rank == bad and i == at:
            if fault == "phang":
                while True:
                    time.sleep(3600)
            w.bcast(i, root=0)
            continue
        w.allreduce(i)
        continue
    if rank == bad and i == at:
        if fault == "hang":
            while True:
                time.sleep(3600)
        elif fault == "bcast":
            w.Bcast(a, root=0)
            continue
        elif fault == "size":
            w.Allreduce(half_a, half_b, op=MPI.SUM)
            continue
        elif fault == "op":
            w.Allreduce(a, b, op=MPI.MAX)
            continue
        elif fault == "raise":
            raise RuntimeError("rank %d fails on purpose before call %d" % (rank, at))
        elif fault == "exit":
            sys.stdout.flush()
            os._exit(3)
    w.Allreduce(a, b, op=MPI.SUM)
print("rank %d done" % rank)
