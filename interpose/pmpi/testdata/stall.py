"""stall.c's patterns in mpi4py, with a known stall (bench/verdicts.sh,
interpose/pmpi/stall_test.go).

    stall.py PATTERN SLOW STALL_MS EVERY ITERS WORK_MS

Every rank works WORK_MS (a sleep), then communicates in PATTERN; rank
SLOW (-1: none) sleeps STALL_MS more before it on one iteration in EVERY.
Patterns: coll (Allreduce), halo (Irecv and Isend to both neighbours,
Waitall), icoll (Iallreduce, half the work again, Wait), sub (Allreduce
on the even or the odd ranks, and every fifth iteration on the world),
obj (pickled objects: comm.allreduce, and comm.sendrecv around a ring).
Rank 0 prints the stalls, how long the slow rank was away in them by its
own clock (on a busy machine a rank wakes late: that too cost the job),
and the loop's time."""
import sys
import time

import numpy as np
from mpi4py import MPI

pat = sys.argv[1] if len(sys.argv) > 1 else "halo"
slow = int(sys.argv[2]) if len(sys.argv) > 2 else -1
stall = float(sys.argv[3]) if len(sys.argv) > 3 else 30.0
every = max(int(sys.argv[4]) if len(sys.argv) > 4 else 10, 1)
iters = int(sys.argv[5]) if len(sys.argv) > 5 else 60
work = float(sys.argv[6]) if len(sys.argv) > 6 else 2.0

w = MPI.COMM_WORLD
rank, size = w.Get_rank(), w.Get_size()
sub = w.Split(rank % 2, rank)
a, b = np.full(1024, float(rank)), np.empty(1024)
lbuf, rbuf = np.empty(1024), np.empty(1024)
left, right = (rank - 1) % size, (rank + 1) % size
stalls = 0
away = 0.0  # s, the slow rank's stalls by its clock
w.Barrier()
t0 = MPI.Wtime()
for it in range(iters):
    time.sleep(work / 1e3)
    if it % every == every // 2:
        stalls += 1
        if rank == slow:
            s0 = MPI.Wtime()
            time.sleep(stall / 1e3)
            away += MPI.Wtime() - s0
    if pat == "coll":
        w.Allreduce(a, b)
    elif pat == "halo":
        reqs = [w.Irecv(lbuf, source=left, tag=1), w.Irecv(rbuf, source=right, tag=2),
                w.Isend(a, dest=left, tag=2), w.Isend(a, dest=right, tag=1)]
        MPI.Request.Waitall(reqs)
    elif pat == "icoll":
        req = w.Iallreduce(a, b)
        time.sleep(work / 2e3)
        req.Wait()
    elif pat == "sub":
        sub.Allreduce(a, b)
        if it % 5 == 4:
            w.Allreduce(a[:8], b[:8])
    elif pat == "obj":
        w.allreduce(rank)
        w.sendrecv(rank, dest=right, source=left)
    else:
        if rank == 0:
            print("stall.py: unknown pattern", pat, file=sys.stderr)
        w.Abort(2)
t1 = MPI.Wtime()
# Unrecorded: the program's own report, not part of its pattern.
MPI.Pcontrol(0)
total = w.reduce(away, op=MPI.SUM, root=0)
if rank == 0:
    print("pattern %s: rank %d stalled %d times for %.1f ms (%.1f ms away by its clock); loop %.1f ms"
          % (pat, slow, stalls if slow >= 0 else 0, stall, 1e3 * total, 1e3 * (t1 - t0)))
sub.Free()
