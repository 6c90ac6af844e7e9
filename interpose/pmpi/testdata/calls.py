"""Every MPI call this script makes is known: interpose/pmpi's tests
record it on 3 ranks and compare each rank's trace with wantCalls in
calls_test.go, event by event. Change both together.

CALLS_PAUSE=SECONDS makes it pause twice, so that a recording flushed
more often than that writes its events in several batches, with the
dictionaries growing from one to the next."""
import os
import time

from mpi4py import MPI
import numpy as np

pause = float(os.environ.get("CALLS_PAUSE", "0"))

w = MPI.COMM_WORLD
r, n = w.Get_rank(), w.Get_size()
left, right = (r - 1) % n, (r + 1) % n
counts = [k + 1 for k in range(n)]
displs = [sum(counts[:k]) for k in range(n)]
f64 = np.ones(1000)
out = np.empty(1000 * n)
mine = np.ones(r + 1)
allv = np.empty(sum(counts))

# World collectives, sequence numbers 0-16.
w.Barrier()
w.Allreduce(f64, out[:1000])
w.Bcast(f64[:100], root=1)
w.Reduce(np.arange(10, dtype=np.int32), np.empty(10, dtype=np.int32), root=2)
w.Allgather(np.ones(16, dtype=np.float32), np.empty(16 * n, dtype=np.float32))
w.Allgatherv(mine, [allv, counts, displs, MPI.DOUBLE])
w.Gather(np.arange(4, dtype=np.int64), np.empty(4 * n, dtype=np.int64) if r == 0 else None, root=0)
w.Gatherv(mine, [allv, counts, displs, MPI.DOUBLE] if r == 0 else None, root=0)
w.Scatter(np.ones(3 * n, dtype=np.float32) if r == 1 else None, np.empty(3, dtype=np.float32), root=1)
w.Scatterv([allv, counts, displs, MPI.DOUBLE] if r == 1 else None, mine, root=1)
w.Reduce_scatter_block(np.ones(5 * n), np.empty(5))
w.Reduce_scatter(np.ones(sum(counts)), np.empty(r + 1), recvcounts=counts)
w.Alltoall(np.ones(2 * n, dtype=np.int32), np.empty(2 * n, dtype=np.int32))
w.Alltoallv([np.ones(sum(counts)), counts, displs, MPI.DOUBLE],
            [np.empty((r + 1) * n), [r + 1] * n, [(r + 1) * k for k in range(n)], MPI.DOUBLE])
# To an even rank one double, to an odd one two ints: 8 bytes to each.
stypes = [MPI.DOUBLE if k % 2 == 0 else MPI.INT for k in range(n)]
w.Alltoallw([np.zeros(n), [1 if k % 2 == 0 else 2 for k in range(n)], [8 * k for k in range(n)], stypes],
            [np.zeros(n), [1 if r % 2 == 0 else 2] * n, [8 * k for k in range(n)], [stypes[r]] * n])
w.Scan(f64[:7], out[:7])
w.Exscan(f64[:7], out[:7])

# Non-blocking collectives, 17-20: completed by Wait, by Test, by Waitall.
w.Iallreduce(f64, out[:1000]).Wait()
req = w.Ibcast(f64[:50], root=0)
while not req.Test():
    pass
MPI.Request.Waitall([w.Ibarrier(), w.Iallgather(np.ones(4), np.empty(4 * n))])

time.sleep(pause)

# A derived datatype: 4 blocks of 2 doubles, 64 bytes; 21.
vec = MPI.DOUBLE.Create_vector(4, 2, 3).Commit()
w.Bcast([np.zeros(12), 1, vec], root=0)
vec.Free()

# Point-to-point on the world.
s = np.full(100, float(r))
rv = np.empty(100)
w.Sendrecv(s, dest=right, sendtag=7, recvbuf=rv, source=left, recvtag=7)
if r == 0:
    w.Send(s[:10], dest=1, tag=11)
    w.Ssend(s[:20], dest=2, tag=12)
elif r == 1:
    w.Recv(rv, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG)
elif r == 2:
    w.Recv(rv[:20], source=0, tag=12)
MPI.Request.Waitall([w.Irecv(rv[:30], source=left, tag=21), w.Isend(s[:30], dest=right, tag=21)])

time.sleep(pause)

# Sub-communicators: even and odd world ranks, in reverse order (22).
sub = w.Split(color=r % 2, key=-r)
sub.Allreduce(f64[:10], out[:10])
if sub.Get_size() > 1:
    other = 1 - sub.Get_rank()
    sub.Sendrecv(s[:5], dest=other, sendtag=3, recvbuf=rv[:5], source=other, recvtag=3)
dup = sub.Dup()
dup.Barrier()
dup.Free()
sub.Free()
w.Barrier()

# Every other non-blocking collective (24-36), each on buffers of its own,
# completed by one Waitall in the order they started.
sc = [k + 1 for k in range(n)]
nb = [
    w.Ireduce(np.arange(10, dtype=np.int32), np.empty(10, dtype=np.int32), root=2),
    w.Iallgatherv(np.ones(r + 1), [np.empty(sum(counts)), counts, displs, MPI.DOUBLE]),
    w.Igather(np.arange(4, dtype=np.int64), np.empty(4 * n, dtype=np.int64) if r == 0 else None, root=0),
    w.Igatherv(np.ones(r + 1), [np.empty(sum(counts)), counts, displs, MPI.DOUBLE] if r == 0 else None, root=0),
    w.Iscatter(np.ones(3 * n, dtype=np.float32) if r == 1 else None, np.empty(3, dtype=np.float32), root=1),
    w.Iscatterv([np.ones(sum(counts)), counts, displs, MPI.DOUBLE] if r == 1 else None, np.empty(r + 1), root=1),
    w.Ireduce_scatter_block(np.ones(5 * n), np.empty(5)),
    w.Ireduce_scatter(np.ones(sum(counts)), np.empty(r + 1), recvcounts=counts),
    w.Ialltoall(np.ones(2 * n, dtype=np.int32), np.empty(2 * n, dtype=np.int32)),
    w.Ialltoallv([np.ones(sum(counts)), counts, displs, MPI.DOUBLE],
                 [np.empty((r + 1) * n), [r + 1] * n, [(r + 1) * k for k in range(n)], MPI.DOUBLE]),
    w.Ialltoallw([np.zeros(n), [1 if k % 2 == 0 else 2 for k in range(n)], [8 * k for k in range(n)], stypes],
                 [np.zeros(n), [1 if r % 2 == 0 else 2] * n, [8 * k for k in range(n)], [stypes[r]] * n]),
    w.Iscan(np.ones(7), np.empty(7)),
    w.Iexscan(np.ones(7), np.empty(7)),
]
MPI.Request.Waitall(nb)

# The pickle API (lowercase), as mpi4py 3.1 makes it of MPI calls: send
# is MPI_Send of the pickle; recv is MPI_Mprobe, then MPI_Mrecv; sendrecv
# is MPI_Isend, the recv, MPI_Wait; bcast is two MPI_Bcast (the pickle's
# length, then the pickle; 37, 38); allreduce reduces point to point on a
# duplicate of the communicator, made at its first use (MPI_Comm_dup, 39),
# and broadcasts there; Message.irecv of what improbe matched is
# MPI_Imrecv. A payload pickles to the same length on every rank, as does
# every small int.
payload = bytes([r]) * 100
if r == 0:
    print("pickled", len(MPI.pickle.dumps(payload)), len(MPI.pickle.dumps(n * (n + 1) // 2)), flush=True)
    w.send(payload, dest=1, tag=41)
elif r == 1:
    assert w.recv(source=0, tag=41) == bytes([0]) * 100
assert w.sendrecv(payload, dest=right, sendtag=42, source=left, recvtag=42) == bytes([left]) * 100
assert w.bcast(payload if r == 0 else None, root=0) == bytes([0]) * 100
assert w.allreduce(r + 1) == n * (n + 1) // 2
if r == 0:
    w.send(payload, dest=2, tag=43)
elif r == 2:
    m = None
    while m is None:
        m = w.improbe(source=0, tag=43)
    assert m.irecv().wait() == bytes([0]) * 100
w.Barrier()
