/* The MPI functions the library records: each calls its PMPI_ twin and,
 * when recording, stamps the call before and after and records it.
 *
 * Only arguments MPI says are significant on a rank are read (a
 * non-root's receive type in MPI_Gather may be anything), and nothing is
 * read when recording is off, so that the library changes nothing a
 * program does.
 */
#include "cp.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The MPI functions are the library's only exports (it is built with
 * -fvisibility=hidden; MPICH's mpi.h does not mark them itself). */
#pragma GCC visibility push(default)

/* ---- collectives ---- */

static inline int64_t next_seq(struct cp_comm *c)
{
	if (c == NULL)
		return -1;
	if (cp.mt)
		return atomic_fetch_add_explicit(&c->seq, 1, memory_order_relaxed);
	int64_t s = atomic_load_explicit(&c->seq, memory_order_relaxed);
	atomic_store_explicit(&c->seq, s + 1, memory_order_relaxed);
	return s;
}

static inline struct cp_comm *begin(struct cp_call *k, MPI_Comm comm)
{
	struct cp_comm *c = cp_comm(comm);
	k->c = c;
	k->seq = next_seq(c);
	k->mismatch = c != NULL && cp_inject_call();
	return c;
}

const struct cp_comm *cp_begin(struct cp_call *k, MPI_Comm comm) { return begin(k, comm); }

static inline struct cp_event coll_event(const struct cp_call *k, int name, int64_t bytes, int32_t dtype, int root)
{
	struct cp_event e = {.start = k->start, .bytes = bytes, .seq = k->seq, .peer = -1,
			     .root = root < 0 ? -1 : cp_world_rank(k->c, root), .name = name,
			     .comm = k->c ? k->c->id : 0, .dtype = dtype, .kind = K_COLLECTIVE};
	return e;
}

/* done records a blocking collective that returned at end. */
static inline void done(const struct cp_call *k, int64_t end, int rc, int name, int64_t bytes, int32_t dtype, int root)
{
	if (rc != MPI_SUCCESS)
		return;
	struct cp_event e = coll_event(k, name, bytes, dtype, root);
	e.dur = end - k->start;
	cp_record(&e);
}

/* started remembers a non-blocking collective until its completion. */
static inline void started(const struct cp_call *k, int rc, MPI_Request req, int name, int64_t bytes, int32_t dtype,
			   int root)
{
	if (rc != MPI_SUCCESS)
		return;
	struct cp_req q = {.ev = coll_event(k, name, bytes, dtype, root), .c = k->c};
	cp_req_add(req, &q);
}

void cp_started(const struct cp_call *k, int rc, MPI_Request req, int name, int64_t bytes, int32_t dtype, int root)
{
	started(k, rc, req, name, bytes, dtype, root);
}

static inline int64_t sum(const int *counts, int n)
{
	int64_t s = 0;
	for (int i = 0; i < n; i++)
		s += counts[i];
	return s;
}

static inline int is_root(const struct cp_comm *c, int root)
{
	return c != NULL && (c->inter ? root == MPI_ROOT : c->rank == root);
}

static inline int size_of(const struct cp_comm *c) { return c ? c->size : 0; }

/* if_coll notes in the in-flight state that a blocking collective is
 * entered (inflight.c). */
static inline void if_coll(const struct cp_call *k, int name, int64_t bytes, int32_t dtype, int root, MPI_Op redop)
{
	cp_if_enter(CP_IFK_COLLECTIVE, cp_names[name], k->c, k->seq, bytes, dtype,
		    root < 0 ? -1 : cp_world_rank(k->c, root), -1, redop, k->start);
}

/* Each collective is defined twice, blocking and not, from one body:
 * ARGS computes bytes, dtype and root before the call. */
#define COLLECTIVE(NAME, IN, PARAMS, ARGS, COMM, ROOT, BODY)                                      \
	int MPI_##NAME PARAMS                                                                     \
	{                                                                                         \
		if (!ON())                                                                        \
			return PMPI_##NAME ARGS;                                                  \
		struct cp_call k;                                                                 \
		const struct cp_comm *c = begin(&k, COMM);                                        \
		if (c == NULL)                                                                    \
			return PMPI_##NAME ARGS;                                                  \
		int64_t bytes = 0;                                                                \
		struct cp_type t = {0, 0};                                                        \
		MPI_Op redop = MPI_OP_NULL;                                                       \
		(void)c;                                                                          \
		BODY;                                                                             \
		int name_ = IN;                                                                   \
		if (k.mismatch) {                                                                 \
			cp_inject_plan(IN, bytes, &name_, &bytes);                                \
			t = cp_type(MPI_BYTE);                                                    \
		}                                                                                 \
		k.start = cp_now();                                                               \
		if_coll(&k, name_, bytes, t.id, ROOT, redop);                                     \
		int rc = k.mismatch ? cp_inject_mismatch(name_, bytes, ROOT, COMM) : PMPI_##NAME ARGS; \
		int64_t end_ = cp_now();                                                          \
		cp_if_exit(rc, end_);                                                             \
		done(&k, end_, rc, name_, bytes, t.id, ROOT);                                     \
		return rc;                                                                        \
	}

#define ICOLLECTIVE(NAME, IN, PARAMS, ARGS, COMM, ROOT, BODY)                                     \
	int MPI_##NAME PARAMS                                                                     \
	{                                                                                         \
		if (!ON())                                                                        \
			return PMPI_##NAME ARGS;                                                  \
		struct cp_call k;                                                                 \
		const struct cp_comm *c = begin(&k, COMM);                                        \
		if (c == NULL)                                                                    \
			return PMPI_##NAME ARGS;                                                  \
		int64_t bytes = 0;                                                                \
		struct cp_type t = {0, 0};                                                        \
		MPI_Op redop = MPI_OP_NULL;                                                       \
		(void)c;                                                                          \
		(void)redop;                                                                      \
		BODY;                                                                             \
		k.start = cp_now();                                                               \
		int rc = PMPI_##NAME ARGS;                                                        \
		started(&k, rc, *req, IN, bytes, t.id, ROOT);                                     \
		return rc;                                                                        \
	}

#define P(...) (__VA_ARGS__)

/* Bodies shared by the blocking and non-blocking forms. */
#define B_COUNT (t = cp_type(dt), bytes = (int64_t)count * t.size)
#define B_RED (B_COUNT, redop = op)
#define B_ALLGATHER (t = cp_type(rt), bytes = (int64_t)rc_ * t.size * size_of(c))
#define B_ALLGATHERV (t = cp_type(rt), bytes = sum(rcs, size_of(c)) * t.size)
#define B_GATHER                                                                   \
	if (is_root(c, root) || s == MPI_IN_PLACE)                                 \
		t = cp_type(rt), bytes = (int64_t)rc_ * t.size * size_of(c);      \
	else if (!c->inter || root != MPI_PROC_NULL)                               \
		t = cp_type(st), bytes = (int64_t)sc * t.size * size_of(c)
#define B_GATHERV                                                              \
	if (is_root(c, root))                                                  \
		t = cp_type(rt), bytes = sum(rcs, size_of(c)) * t.size;       \
	else if (!c->inter || root != MPI_PROC_NULL)                           \
		t = cp_type(st), bytes = (int64_t)sc * t.size
#define B_SCATTER                                                                  \
	if (is_root(c, root))                                                      \
		t = cp_type(st), bytes = (int64_t)sc * t.size * size_of(c);       \
	else if (!c->inter || root != MPI_PROC_NULL)                               \
		t = cp_type(rt), bytes = (int64_t)rc_ * t.size * size_of(c)
#define B_SCATTERV                                                             \
	if (is_root(c, root))                                                  \
		t = cp_type(st), bytes = sum(scs, size_of(c)) * t.size;       \
	else if (!c->inter || root != MPI_PROC_NULL)                           \
		t = cp_type(rt), bytes = (int64_t)rc_ * t.size
#define B_RSBLOCK (redop = op, t = cp_type(dt), bytes = (int64_t)rc_ * t.size * (c && !c->inter ? c->size : 0))
#define B_RS (redop = op, t = cp_type(dt), bytes = sum(rcs, c && !c->inter ? c->size : 0) * t.size)
#define B_ALLTOALL                                                          \
	if (s == MPI_IN_PLACE)                                              \
		t = cp_type(rt), bytes = (int64_t)rc_ * t.size * size_of(c);\
	else                                                                \
		t = cp_type(st), bytes = (int64_t)sc * t.size * size_of(c)
#define B_ALLTOALLV                                                         \
	if (s == MPI_IN_PLACE)                                              \
		t = cp_type(rt), bytes = sum(rcs, size_of(c)) * t.size;     \
	else                                                                \
		t = cp_type(st), bytes = sum(scs, size_of(c)) * t.size
#define B_ALLTOALLW                                                             \
	{                                                                       \
		const int *n_ = s == MPI_IN_PLACE ? rcs : scs;                  \
		const MPI_Datatype *ty_ = s == MPI_IN_PLACE ? rts : sts;        \
		for (int i = 0; i < size_of(c); i++)                            \
			bytes += (int64_t)n_[i] * cp_type(ty_[i]).size;         \
	}

COLLECTIVE(Allreduce, N_ALLREDUCE,
	   P(const void *s, void *r, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm),
	   P(s, r, count, dt, op, comm), comm, -1, B_RED)
ICOLLECTIVE(Iallreduce, N_ALLREDUCE,
	    P(const void *s, void *r, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, MPI_Request *req),
	    P(s, r, count, dt, op, comm, req), comm, -1, B_RED)
COLLECTIVE(Bcast, N_BROADCAST, P(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm),
	   P(buf, count, dt, root, comm), comm, root, B_COUNT)
ICOLLECTIVE(Ibcast, N_BROADCAST, P(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm, MPI_Request *req),
	    P(buf, count, dt, root, comm, req), comm, root, B_COUNT)
COLLECTIVE(Reduce, N_REDUCE,
	   P(const void *s, void *r, int count, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm),
	   P(s, r, count, dt, op, root, comm), comm, root, B_RED)
ICOLLECTIVE(Ireduce, N_REDUCE,
	    P(const void *s, void *r, int count, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm, MPI_Request *req),
	    P(s, r, count, dt, op, root, comm, req), comm, root, B_RED)
COLLECTIVE(Allgather, N_ALLGATHER,
	   P(const void *s, int sc, MPI_Datatype st, void *r, int rc_, MPI_Datatype rt, MPI_Comm comm),
	   P(s, sc, st, r, rc_, rt, comm), comm, -1, B_ALLGATHER)
ICOLLECTIVE(Iallgather, N_ALLGATHER,
	    P(const void *s, int sc, MPI_Datatype st, void *r, int rc_, MPI_Datatype rt, MPI_Comm comm, MPI_Request *req),
	    P(s, sc, st, r, rc_, rt, comm, req), comm, -1, B_ALLGATHER)
COLLECTIVE(Allgatherv, N_ALLGATHERV,
	   P(const void *s, int sc, MPI_Datatype st, void *r, const int rcs[], const int displs[], MPI_Datatype rt,
	     MPI_Comm comm),
	   P(s, sc, st, r, rcs, displs, rt, comm), comm, -1, B_ALLGATHERV)
ICOLLECTIVE(Iallgatherv, N_ALLGATHERV,
	    P(const void *s, int sc, MPI_Datatype st, void *r, const int rcs[], const int displs[], MPI_Datatype rt,
	      MPI_Comm comm, MPI_Request *req),
	    P(s, sc, st, r, rcs, displs, rt, comm, req), comm, -1, B_ALLGATHERV)
COLLECTIVE(Gather, N_GATHER,
	   P(const void *s, int sc, MPI_Datatype st, void *r, int rc_, MPI_Datatype rt, int root, MPI_Comm comm),
	   P(s, sc, st, r, rc_, rt, root, comm), comm, root, B_GATHER)
ICOLLECTIVE(Igather, N_GATHER,
	    P(const void *s, int sc, MPI_Datatype st, void *r, int rc_, MPI_Datatype rt, int root, MPI_Comm comm,
	      MPI_Request *req),
	    P(s, sc, st, r, rc_, rt, root, comm, req), comm, root, B_GATHER)
COLLECTIVE(Gatherv, N_GATHERV,
	   P(const void *s, int sc, MPI_Datatype st, void *r, const int rcs[], const int displs[], MPI_Datatype rt,
	     int root, MPI_Comm comm),
	   P(s, sc, st, r, rcs, displs, rt, root, comm), comm, root, B_GATHERV)
ICOLLECTIVE(Igatherv, N_GATHERV,
	    P(const void *s, int sc, MPI_Datatype st, void *r, const int rcs[], const int displs[], MPI_Datatype rt,
	      int root, MPI_Comm comm, MPI_Request *req),
	    P(s, sc, st, r, rcs, displs, rt, root, comm, req), comm, root, B_GATHERV)
COLLECTIVE(Scatter, N_SCATTER,
	   P(const void *s, int sc, MPI_Datatype st, void *r, int rc_, MPI_Datatype rt, int root, MPI_Comm comm),
	   P(s, sc, st, r, rc_, rt, root, comm), comm, root, B_SCATTER)
ICOLLECTIVE(Iscatter, N_SCATTER,
	    P(const void *s, int sc, MPI_Datatype st, void *r, int rc_, MPI_Datatype rt, int root, MPI_Comm comm,
	      MPI_Request *req),
	    P(s, sc, st, r, rc_, rt, root, comm, req), comm, root, B_SCATTER)
COLLECTIVE(Scatterv, N_SCATTERV,
	   P(const void *s, const int scs[], const int displs[], MPI_Datatype st, void *r, int rc_, MPI_Datatype rt,
	     int root, MPI_Comm comm),
	   P(s, scs, displs, st, r, rc_, rt, root, comm), comm, root, B_SCATTERV)
ICOLLECTIVE(Iscatterv, N_SCATTERV,
	    P(const void *s, const int scs[], const int displs[], MPI_Datatype st, void *r, int rc_, MPI_Datatype rt,
	      int root, MPI_Comm comm, MPI_Request *req),
	    P(s, scs, displs, st, r, rc_, rt, root, comm, req), comm, root, B_SCATTERV)
COLLECTIVE(Reduce_scatter_block, N_REDUCESCATTER,
	   P(const void *s, void *r, int rc_, MPI_Datatype dt, MPI_Op op, MPI_Comm comm),
	   P(s, r, rc_, dt, op, comm), comm, -1, B_RSBLOCK)
ICOLLECTIVE(Ireduce_scatter_block, N_REDUCESCATTER,
	    P(const void *s, void *r, int rc_, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, MPI_Request *req),
	    P(s, r, rc_, dt, op, comm, req), comm, -1, B_RSBLOCK)
COLLECTIVE(Reduce_scatter, N_REDUCESCATTERV,
	   P(const void *s, void *r, const int rcs[], MPI_Datatype dt, MPI_Op op, MPI_Comm comm),
	   P(s, r, rcs, dt, op, comm), comm, -1, B_RS)
ICOLLECTIVE(Ireduce_scatter, N_REDUCESCATTERV,
	    P(const void *s, void *r, const int rcs[], MPI_Datatype dt, MPI_Op op, MPI_Comm comm, MPI_Request *req),
	    P(s, r, rcs, dt, op, comm, req), comm, -1, B_RS)
COLLECTIVE(Alltoall, N_ALLTOALL,
	   P(const void *s, int sc, MPI_Datatype st, void *r, int rc_, MPI_Datatype rt, MPI_Comm comm),
	   P(s, sc, st, r, rc_, rt, comm), comm, -1, B_ALLTOALL)
ICOLLECTIVE(Ialltoall, N_ALLTOALL,
	    P(const void *s, int sc, MPI_Datatype st, void *r, int rc_, MPI_Datatype rt, MPI_Comm comm, MPI_Request *req),
	    P(s, sc, st, r, rc_, rt, comm, req), comm, -1, B_ALLTOALL)
COLLECTIVE(Alltoallv, N_ALLTOALLV,
	   P(const void *s, const int scs[], const int sd[], MPI_Datatype st, void *r, const int rcs[], const int rd[],
	     MPI_Datatype rt, MPI_Comm comm),
	   P(s, scs, sd, st, r, rcs, rd, rt, comm), comm, -1, B_ALLTOALLV)
ICOLLECTIVE(Ialltoallv, N_ALLTOALLV,
	    P(const void *s, const int scs[], const int sd[], MPI_Datatype st, void *r, const int rcs[], const int rd[],
	      MPI_Datatype rt, MPI_Comm comm, MPI_Request *req),
	    P(s, scs, sd, st, r, rcs, rd, rt, comm, req), comm, -1, B_ALLTOALLV)
COLLECTIVE(Alltoallw, N_ALLTOALLW,
	   P(const void *s, const int scs[], const int sd[], const MPI_Datatype sts[], void *r, const int rcs[],
	     const int rd[], const MPI_Datatype rts[], MPI_Comm comm),
	   P(s, scs, sd, sts, r, rcs, rd, rts, comm), comm, -1, B_ALLTOALLW)
ICOLLECTIVE(Ialltoallw, N_ALLTOALLW,
	    P(const void *s, const int scs[], const int sd[], const MPI_Datatype sts[], void *r, const int rcs[],
	      const int rd[], const MPI_Datatype rts[], MPI_Comm comm, MPI_Request *req),
	    P(s, scs, sd, sts, r, rcs, rd, rts, comm, req), comm, -1, B_ALLTOALLW)
COLLECTIVE(Barrier, N_BARRIER, P(MPI_Comm comm), P(comm), comm, -1, (void)0)
ICOLLECTIVE(Ibarrier, N_BARRIER, P(MPI_Comm comm, MPI_Request *req), P(comm, req), comm, -1, (void)0)
COLLECTIVE(Scan, N_SCAN, P(const void *s, void *r, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm),
	   P(s, r, count, dt, op, comm), comm, -1, B_RED)
ICOLLECTIVE(Iscan, N_SCAN,
	    P(const void *s, void *r, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, MPI_Request *req),
	    P(s, r, count, dt, op, comm, req), comm, -1, B_RED)
COLLECTIVE(Exscan, N_EXSCAN, P(const void *s, void *r, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm),
	   P(s, r, count, dt, op, comm), comm, -1, B_RED)
ICOLLECTIVE(Iexscan, N_EXSCAN,
	    P(const void *s, void *r, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, MPI_Request *req),
	    P(s, r, count, dt, op, comm, req), comm, -1, B_RED)

/* ---- point-to-point ---- */

static inline struct cp_event p2p_event(int kind, int64_t start, int64_t bytes, int32_t dtype, const struct cp_comm *c,
					 int peer, int tag)
{
	struct cp_event e = {.start = start, .bytes = bytes, .seq = tag, .peer = cp_world_rank(c, peer), .root = -1,
			     .name = N_SENDRECV, .comm = c ? c->id : 0, .dtype = dtype, .kind = (int8_t)kind};
	return e;
}

/* received fills in what a receive's status says: the source, the tag
 * and the bytes that arrived. It returns 0 for a cancelled receive. */
static inline int received(struct cp_event *e, const struct cp_comm *c, const MPI_Status *st)
{
	int flag = 0;
	PMPI_Test_cancelled(st, &flag);
	if (flag)
		return 0;
	int n = 0;
	/* MPI_BYTE: the status's count in bytes, whatever the type. */
	if (PMPI_Get_count(st, MPI_BYTE, &n) == MPI_SUCCESS && n != MPI_UNDEFINED)
		e->bytes = n;
	e->peer = cp_world_rank(c, st->MPI_SOURCE);
	e->seq = st->MPI_TAG;
	return 1;
}

#define SEND(NAME)                                                                                      \
	int MPI_##NAME(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm)   \
	{                                                                                               \
		if (!ON() || dest == MPI_PROC_NULL)                                                     \
			return PMPI_##NAME(buf, count, dt, dest, tag, comm);                            \
		struct cp_type t = cp_type(dt);                                                         \
		const struct cp_comm *c = cp_comm(comm);                                                \
		int64_t start = cp_now();                                                               \
		cp_if_enter(CP_IFK_SEND, "send", c, tag, (int64_t)count * t.size, t.id, -1,            \
			    cp_world_rank(c, dest), MPI_OP_NULL, start);                                       \
		int rc = PMPI_##NAME(buf, count, dt, dest, tag, comm);                                  \
		int64_t end = cp_now();                                                                 \
		cp_if_exit(rc, end);                                                                         \
		if (rc == MPI_SUCCESS) {                                                                \
			struct cp_event e = p2p_event(K_SEND, start, (int64_t)count * t.size, t.id, c, dest, tag); \
			e.dur = end - start;                                                            \
			cp_record(&e);                                                                  \
		}                                                                                       \
		return rc;                                                                              \
	}

SEND(Send)
SEND(Ssend)
SEND(Bsend)
SEND(Rsend)

#define ISEND(NAME)                                                                                     \
	int MPI_##NAME(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,   \
		       MPI_Request *req)                                                                \
	{                                                                                               \
		if (!ON() || dest == MPI_PROC_NULL)                                                     \
			return PMPI_##NAME(buf, count, dt, dest, tag, comm, req);                       \
		struct cp_type t = cp_type(dt);                                                         \
		const struct cp_comm *c = cp_comm(comm);                                                \
		int64_t start = cp_now();                                                               \
		int rc = PMPI_##NAME(buf, count, dt, dest, tag, comm, req);                             \
		if (rc == MPI_SUCCESS) {                                                                \
			struct cp_req q = {.ev = p2p_event(K_SEND, start, (int64_t)count * t.size, t.id, c, dest, tag), \
					   .c = c};                                                     \
			cp_req_add(*req, &q);                                                           \
		}                                                                                       \
		return rc;                                                                              \
	}

ISEND(Isend)
ISEND(Issend)
ISEND(Ibsend)
ISEND(Irsend)

int MPI_Recv(void *buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm, MPI_Status *st)
{
	if (!ON() || src == MPI_PROC_NULL)
		return PMPI_Recv(buf, count, dt, src, tag, comm, st);
	MPI_Status mine;
	if (st == MPI_STATUS_IGNORE)
		st = &mine;
	struct cp_type t = cp_type(dt);
	const struct cp_comm *c = cp_comm(comm);
	int64_t start = cp_now();
	cp_if_enter(CP_IFK_RECV, "recv", c, tag, (int64_t)count * t.size, t.id, -1, src == MPI_ANY_SOURCE ? -2 : cp_world_rank(c, src),
		    MPI_OP_NULL, start);
	int rc = PMPI_Recv(buf, count, dt, src, tag, comm, st);
	int64_t end = cp_now();
	cp_if_exit(rc, end);
	if (rc == MPI_SUCCESS) {
		struct cp_event e = p2p_event(K_RECV, start, (int64_t)count * t.size, t.id, c, src, tag);
		e.dur = end - start;
		if (received(&e, c, st))
			cp_record(&e);
	}
	return rc;
}

int MPI_Irecv(void *buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm, MPI_Request *req)
{
	if (!ON() || src == MPI_PROC_NULL)
		return PMPI_Irecv(buf, count, dt, src, tag, comm, req);
	struct cp_type t = cp_type(dt);
	const struct cp_comm *c = cp_comm(comm);
	int64_t start = cp_now();
	int rc = PMPI_Irecv(buf, count, dt, src, tag, comm, req);
	if (rc == MPI_SUCCESS) {
		struct cp_req q = {.ev = p2p_event(K_RECV, start, (int64_t)count * t.size, t.id, c, src, tag), .c = c};
		cp_req_add(*req, &q);
	}
	return rc;
}

/* Matched probes and receives (mpi4py's comm.recv() is MPI_Mprobe, then
 * MPI_Mrecv). The receive is recorded from the probe's start, when the
 * program began to wait for the message, to the receive's end; the
 * probe remembers its communicator for the receive. A receive of a
 * message probed while the library was not recording is not recorded. */
static void probed(int rc, int64_t start, const MPI_Message *msg, MPI_Comm comm)
{
	if (rc != MPI_SUCCESS || *msg == MPI_MESSAGE_NULL || *msg == MPI_MESSAGE_NO_PROC)
		return;
	const struct cp_comm *c = cp_comm(comm);
	struct cp_req q = {.ev = p2p_event(K_RECV, start, 0, 0, c, MPI_ANY_SOURCE, MPI_ANY_TAG), .c = c};
	cp_msg_add(*msg, &q);
}

int MPI_Mprobe(int src, int tag, MPI_Comm comm, MPI_Message *msg, MPI_Status *st)
{
	if (!ON() || src == MPI_PROC_NULL)
		return PMPI_Mprobe(src, tag, comm, msg, st);
	const struct cp_comm *c = cp_comm(comm);
	int64_t start = cp_now();
	cp_if_enter(CP_IFK_RECV, "recv", c, tag, 0, 0, -1, src == MPI_ANY_SOURCE ? -2 : cp_world_rank(c, src), MPI_OP_NULL, start);
	int rc = PMPI_Mprobe(src, tag, comm, msg, st);
	cp_if_exit(rc, cp_now());
	probed(rc, start, msg, comm);
	return rc;
}

int MPI_Improbe(int src, int tag, MPI_Comm comm, int *flag, MPI_Message *msg, MPI_Status *st)
{
	if (!ON() || src == MPI_PROC_NULL)
		return PMPI_Improbe(src, tag, comm, flag, msg, st);
	int64_t start = cp_now();
	int rc = PMPI_Improbe(src, tag, comm, flag, msg, st);
	if (rc == MPI_SUCCESS && *flag)
		probed(rc, start, msg, comm);
	return rc;
}

int MPI_Mrecv(void *buf, int count, MPI_Datatype dt, MPI_Message *msg, MPI_Status *st)
{
	if (!LIVE())
		return PMPI_Mrecv(buf, count, dt, msg, st);
	int on = ON();
	MPI_Status mine;
	if (st == MPI_STATUS_IGNORE)
		st = &mine;
	MPI_Message h = *msg;
	struct cp_type t = cp_type(dt);
	int rc = PMPI_Mrecv(buf, count, dt, msg, st);
	int64_t end = cp_now();
	struct cp_req q;
	if (cp_msg_take(h, &q)) {
		struct cp_event *e = &q.ev;
		e->bytes = (int64_t)count * t.size;
		e->dtype = t.id;
		e->dur = end - e->start;
		if (on && rc == MPI_SUCCESS && received(e, q.c, st))
			cp_record(e);
		cp_comm_unref(q.c);
	}
	return rc;
}

int MPI_Imrecv(void *buf, int count, MPI_Datatype dt, MPI_Message *msg, MPI_Request *req)
{
	if (!LIVE())
		return PMPI_Imrecv(buf, count, dt, msg, req);
	int on = ON();
	MPI_Message h = *msg;
	struct cp_type t = cp_type(dt);
	int rc = PMPI_Imrecv(buf, count, dt, msg, req);
	struct cp_req q;
	if (cp_msg_take(h, &q)) {
		q.ev.bytes = (int64_t)count * t.size;
		q.ev.dtype = t.id;
		if (on && rc == MPI_SUCCESS)
			cp_req_add(*req, &q);
		cp_comm_unref(q.c);
	}
	return rc;
}

int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag, void *rbuf, int rcount,
		 MPI_Datatype rtype, int src, int rtag, MPI_Comm comm, MPI_Status *st)
{
	if (!ON())
		return PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, src, rtag, comm, st);
	MPI_Status mine;
	if (st == MPI_STATUS_IGNORE)
		st = &mine;
	struct cp_type ts = cp_type(stype), tr = cp_type(rtype);
	const struct cp_comm *c = cp_comm(comm);
	int64_t start = cp_now();
	cp_if_enter(CP_IFK_RECV, "sendrecv", c, rtag, (int64_t)rcount * tr.size, tr.id, -1,
		    src == MPI_ANY_SOURCE ? -2 : src == MPI_PROC_NULL ? -1 : cp_world_rank(c, src), MPI_OP_NULL, start);
	int rc = PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, src, rtag, comm, st);
	int64_t end = cp_now();
	cp_if_exit(rc, end);
	if (rc == MPI_SUCCESS) {
		if (dest != MPI_PROC_NULL) {
			struct cp_event e = p2p_event(K_SEND, start, (int64_t)scount * ts.size, ts.id, c, dest, stag);
			e.dur = end - start;
			cp_record(&e);
		}
		if (src != MPI_PROC_NULL) {
			struct cp_event e = p2p_event(K_RECV, start, (int64_t)rcount * tr.size, tr.id, c, src, rtag);
			e.dur = end - start;
			if (received(&e, c, st))
				cp_record(&e);
		}
	}
	return rc;
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype dt, int dest, int stag, int src, int rtag, MPI_Comm comm,
			 MPI_Status *st)
{
	if (!ON())
		return PMPI_Sendrecv_replace(buf, count, dt, dest, stag, src, rtag, comm, st);
	MPI_Status mine;
	if (st == MPI_STATUS_IGNORE)
		st = &mine;
	struct cp_type t = cp_type(dt);
	const struct cp_comm *c = cp_comm(comm);
	int64_t start = cp_now();
	int rc = PMPI_Sendrecv_replace(buf, count, dt, dest, stag, src, rtag, comm, st);
	int64_t end = cp_now();
	if (rc == MPI_SUCCESS) {
		if (dest != MPI_PROC_NULL) {
			struct cp_event e = p2p_event(K_SEND, start, (int64_t)count * t.size, t.id, c, dest, stag);
			e.dur = end - start;
			cp_record(&e);
		}
		if (src != MPI_PROC_NULL) {
			struct cp_event e = p2p_event(K_RECV, start, (int64_t)count * t.size, t.id, c, src, rtag);
			e.dur = end - start;
			if (received(&e, c, st))
				cp_record(&e);
		}
	}
	return rc;
}

/* ---- completions ---- */

static void created(const struct cp_comm *parent, const char *op, int32_t n, MPI_Comm nc, int color);
enum { SUFFIX_LOWEST = -2, SUFFIX_NONE = -3 };

/* complete records what a request started, now that a completion call
 * that began at wait_start saw it end at end: the operation's event and
 * the program's wait for it, which began at the first MPI_Test... that
 * found it unfinished if one did. It drops the request's reference to
 * its communicator. */
static void complete(struct cp_req *q, const MPI_Status *st, int64_t wait_start, int64_t end)
{
	struct cp_event *e = &q->ev;
	int keep = 1;
	if (e->kind == K_RECV) {
		keep = received(e, q->c, st);
	} else if (e->kind == K_SEND) {
		int flag = 0;
		PMPI_Test_cancelled(st, &flag);
		keep = !flag;
	}
	cp_if_progress(end);
	if (keep) {
		e->dur = end - e->start;
		cp_record(e);
		struct cp_event w = *e;
		w.kind = K_WAIT;
		w.start = q->tested && q->tested < wait_start ? q->tested : wait_start;
		w.dur = end - w.start;
		cp_record(&w);
	}
	if (q->makes)
		created(q->c, "dup", q->made_n, q->made, SUFFIX_NONE);
	cp_comm_unref(q->c);
}

/* tested notes that a test call at t found the requests h[0..n) that
 * are not MPI_REQUEST_NULL in reqs unfinished. */
static void tested(int n, const MPI_Request *h, int64_t t)
{
	for (int i = 0; i < n; i++)
		cp_req_tested(h[i], t);
}

/* Scratch space for the completion calls over arrays: the handles as
 * they were (MPI sets completed ones to MPI_REQUEST_NULL) and statuses
 * when the program passed MPI_STATUSES_IGNORE. Per thread; grown, never
 * shrunk. */
static __thread struct {
	MPI_Request *req;
	MPI_Status *st;
	int cap;
} scratch __attribute__((tls_model("initial-exec")));

static int scratch_for(int n)
{
	if (n <= scratch.cap)
		return 0;
	int cap = scratch.cap ? scratch.cap : 64;
	while (cap < n)
		cap *= 2;
	MPI_Request *r = realloc(scratch.req, sizeof *r * (size_t)cap);
	if (r == NULL)
		return -1;
	scratch.req = r;
	MPI_Status *s = realloc(scratch.st, sizeof *s * (size_t)cap);
	if (s == NULL)
		return -1;
	scratch.st = s;
	scratch.cap = cap;
	return 0;
}

int MPI_Wait(MPI_Request *req, MPI_Status *st)
{
	if (!ON())
		return PMPI_Wait(req, st);
	MPI_Status mine;
	if (st == MPI_STATUS_IGNORE)
		st = &mine;
	MPI_Request h = *req;
	int64_t start = cp_now();
	cp_if_enter(CP_IFK_WAIT, "wait", NULL, -1, 0, 0, -1, -1, MPI_OP_NULL, start);
	int rc = PMPI_Wait(req, st);
	int64_t end = cp_now();
	cp_if_exit(rc, end);
	struct cp_req q;
	if (rc == MPI_SUCCESS && cp_req_take(h, &q))
		complete(&q, st, start, end);
	return rc;
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *st)
{
	if (!ON())
		return PMPI_Test(req, flag, st);
	MPI_Status mine;
	if (st == MPI_STATUS_IGNORE)
		st = &mine;
	MPI_Request h = *req;
	int64_t start = cp_now();
	int rc = PMPI_Test(req, flag, st);
	if (rc == MPI_SUCCESS && *flag) {
		int64_t end = cp_now();
		struct cp_req q;
		if (cp_req_take(h, &q))
			complete(&q, st, start, end);
	} else if (rc == MPI_SUCCESS)
		cp_req_tested(h, start);
	return rc;
}

/* completed records the requests of h (the handles before the call) that
 * the call completed: those now MPI_REQUEST_NULL in reqs, with statuses
 * st[i]. */
static void completed_all(int n, const MPI_Request *h, const MPI_Request *reqs, const MPI_Status *st, int64_t start,
			  int64_t end)
{
	for (int i = 0; i < n; i++) {
		struct cp_req q;
		if (h[i] != MPI_REQUEST_NULL && reqs[i] == MPI_REQUEST_NULL && cp_req_take(h[i], &q))
			complete(&q, &st[i], start, end);
	}
}

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status sts[])
{
	if (!ON() || n <= 0 || scratch_for(n))
		return PMPI_Waitall(n, reqs, sts);
	MPI_Status *st = sts == MPI_STATUSES_IGNORE ? scratch.st : sts;
	memcpy(scratch.req, reqs, sizeof *reqs * (size_t)n);
	int64_t start = cp_now();
	cp_if_enter(CP_IFK_WAIT, "wait", NULL, -1, 0, 0, -1, -1, MPI_OP_NULL, start);
	int rc = PMPI_Waitall(n, reqs, st);
	int64_t end = cp_now();
	cp_if_exit(rc, end);
	if (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS)
		completed_all(n, scratch.req, reqs, st, start, end);
	return rc;
}

int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status sts[])
{
	if (!ON() || n <= 0 || scratch_for(n))
		return PMPI_Testall(n, reqs, flag, sts);
	MPI_Status *st = sts == MPI_STATUSES_IGNORE ? scratch.st : sts;
	memcpy(scratch.req, reqs, sizeof *reqs * (size_t)n);
	int64_t start = cp_now();
	int rc = PMPI_Testall(n, reqs, flag, st);
	if ((rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) && *flag)
		completed_all(n, scratch.req, reqs, st, start, cp_now());
	else if (rc == MPI_SUCCESS)
		tested(n, scratch.req, start);
	return rc;
}

int MPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *st)
{
	if (!ON() || n <= 0 || scratch_for(n))
		return PMPI_Waitany(n, reqs, index, st);
	MPI_Status mine;
	if (st == MPI_STATUS_IGNORE)
		st = &mine;
	memcpy(scratch.req, reqs, sizeof *reqs * (size_t)n);
	int64_t start = cp_now();
	cp_if_enter(CP_IFK_WAIT, "wait", NULL, -1, 0, 0, -1, -1, MPI_OP_NULL, start);
	int rc = PMPI_Waitany(n, reqs, index, st);
	int64_t end = cp_now();
	cp_if_exit(rc, end);
	struct cp_req q;
	if (rc == MPI_SUCCESS && *index != MPI_UNDEFINED && cp_req_take(scratch.req[*index], &q))
		complete(&q, st, start, end);
	return rc;
}

int MPI_Testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *st)
{
	if (!ON() || n <= 0 || scratch_for(n))
		return PMPI_Testany(n, reqs, index, flag, st);
	MPI_Status mine;
	if (st == MPI_STATUS_IGNORE)
		st = &mine;
	memcpy(scratch.req, reqs, sizeof *reqs * (size_t)n);
	int64_t start = cp_now();
	int rc = PMPI_Testany(n, reqs, index, flag, st);
	struct cp_req q;
	if (rc == MPI_SUCCESS && *flag && *index != MPI_UNDEFINED && cp_req_take(scratch.req[*index], &q))
		complete(&q, st, start, cp_now());
	else if (rc == MPI_SUCCESS && !*flag)
		tested(n, scratch.req, start);
	return rc;
}

static void completed_some(int out, const int *idx, const MPI_Status *st, int64_t start, int64_t end)
{
	for (int k = 0; k < out; k++) {
		struct cp_req q;
		if (cp_req_take(scratch.req[idx[k]], &q))
			complete(&q, &st[k], start, end);
	}
}

int MPI_Waitsome(int n, MPI_Request reqs[], int *out, int idx[], MPI_Status sts[])
{
	if (!ON() || n <= 0 || scratch_for(n))
		return PMPI_Waitsome(n, reqs, out, idx, sts);
	MPI_Status *st = sts == MPI_STATUSES_IGNORE ? scratch.st : sts;
	memcpy(scratch.req, reqs, sizeof *reqs * (size_t)n);
	int64_t start = cp_now();
	cp_if_enter(CP_IFK_WAIT, "wait", NULL, -1, 0, 0, -1, -1, MPI_OP_NULL, start);
	int rc = PMPI_Waitsome(n, reqs, out, idx, st);
	int64_t end = cp_now();
	cp_if_exit(rc, end);
	if (rc == MPI_SUCCESS && *out != MPI_UNDEFINED)
		completed_some(*out, idx, st, start, end);
	return rc;
}

int MPI_Testsome(int n, MPI_Request reqs[], int *out, int idx[], MPI_Status sts[])
{
	if (!ON() || n <= 0 || scratch_for(n))
		return PMPI_Testsome(n, reqs, out, idx, sts);
	MPI_Status *st = sts == MPI_STATUSES_IGNORE ? scratch.st : sts;
	memcpy(scratch.req, reqs, sizeof *reqs * (size_t)n);
	int64_t start = cp_now();
	int rc = PMPI_Testsome(n, reqs, out, idx, st);
	if (rc == MPI_SUCCESS && *out != MPI_UNDEFINED && *out > 0)
		completed_some(*out, idx, st, start, cp_now());
	else if (rc == MPI_SUCCESS && *out == 0)
		tested(n, scratch.req, start);
	return rc;
}

int MPI_Request_free(MPI_Request *req)
{
	if (!ON())
		return PMPI_Request_free(req);
	MPI_Request h = *req;
	int rc = PMPI_Request_free(req);
	struct cp_req q;
	/* Its completion will not be seen: a send is recorded until here. */
	if (rc == MPI_SUCCESS && cp_req_take(h, &q)) {
		if (q.ev.kind == K_SEND) {
			q.ev.dur = cp_now() - q.ev.start;
			cp_record(&q.ev);
		}
		cp_comm_unref(q.c);
	}
	return rc;
}

/* ---- communicators and datatypes ---- */

/* created names and registers a communicator made from parent by the
 * n-th creating call op on it: parent/opN, then ":" and the split's
 * color (color >= 0), or ":" and the lowest world rank in it where one
 * call makes several communicators (SUFFIX_LOWEST). It records the
 * mpi.comm mark that says this rank belongs to it. */
/* named registers nc under name (and its lowest world rank, if lowest)
 * and, for an intracommunicator, records the mpi.comm mark. */
static void named(MPI_Comm nc, const char *name, int lowest)
{
	struct cp_comm *d = cp_comm_add(nc, name, lowest);
	if (d == NULL || d->inter)
		return;
	struct cp_event e = {.start = cp_now(), .seq = d->rank, .value = d->size, .peer = -1, .root = -1,
			     .name = N_MARK_COMM, .comm = d->id, .kind = K_MARK};
	cp_record(&e);
}

static void created(const struct cp_comm *parent, const char *op, int32_t n, MPI_Comm nc, int color)
{
	if (nc == MPI_COMM_NULL)
		return;
	char name[CP_NAME_MAX + 64];
	int w = snprintf(name, sizeof name, "%s/%s%d", parent ? parent->name : "unknown", op, n);
	if (w >= 0 && (size_t)w < sizeof name && color >= 0)
		snprintf(name + w, sizeof name - (size_t)w, ":%d", color);
	named(nc, name, color == SUFFIX_LOWEST);
}

static inline int32_t next_child(struct cp_comm *c)
{
	return c ? atomic_fetch_add_explicit(&c->created, 1, memory_order_relaxed) : 0;
}

/* CREATE defines a communicator-making call that is collective over its
 * parent: recorded as a collective on the parent, then named. */
#define CREATE(NAME, IN, OP, PARAMS, ARGS, NEWCOMM, SUFFIX)                  \
	int MPI_##NAME PARAMS                                                \
	{                                                                    \
		if (!LIVE())                                                 \
			return PMPI_##NAME ARGS;                             \
		struct cp_call k;                                            \
		int on = ON();                                               \
		struct cp_comm *c = begin(&k, comm);                         \
		int32_t n = next_child(c);                                   \
		k.start = cp_now();                                          \
		if (on)                                                      \
			if_coll(&k, IN, 0, 0, -1, MPI_OP_NULL);              \
		int rc = PMPI_##NAME ARGS;                                   \
		if (on)                                                      \
			cp_if_exit(rc, cp_now());                                      \
		if (on)                                                      \
			done(&k, cp_now(), rc, IN, 0, 0, -1);                \
		if (rc == MPI_SUCCESS)                                       \
			created(c, OP, n, *(NEWCOMM), SUFFIX);               \
		return rc;                                                   \
	}

CREATE(Comm_split, N_COMM_SPLIT, "split", P(MPI_Comm comm, int color, int key, MPI_Comm *nc),
       P(comm, color, key, nc), nc, color)
CREATE(Comm_split_type, N_COMM_SPLIT_TYPE, "split_type",
       P(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *nc), P(comm, type, key, info, nc), nc,
       SUFFIX_LOWEST)
CREATE(Comm_dup, N_COMM_DUP, "dup", P(MPI_Comm comm, MPI_Comm *nc), P(comm, nc), nc, SUFFIX_NONE)
CREATE(Comm_dup_with_info, N_COMM_DUP, "dup", P(MPI_Comm comm, MPI_Info info, MPI_Comm *nc), P(comm, info, nc), nc,
       SUFFIX_NONE)
CREATE(Comm_create, N_COMM_CREATE, "create", P(MPI_Comm comm, MPI_Group group, MPI_Comm *nc), P(comm, group, nc), nc,
       SUFFIX_LOWEST)
CREATE(Cart_create, N_CART_CREATE, "cart",
       P(MPI_Comm comm, int ndims, const int dims[], const int periods[], int reorder, MPI_Comm *nc),
       P(comm, ndims, dims, periods, reorder, nc), nc, SUFFIX_NONE)
CREATE(Cart_sub, N_CART_SUB, "cart_sub", P(MPI_Comm comm, const int remain[], MPI_Comm *nc), P(comm, remain, nc), nc,
       SUFFIX_LOWEST)
CREATE(Graph_create, N_GRAPH_CREATE, "graph",
       P(MPI_Comm comm, int nnodes, const int index[], const int edges[], int reorder, MPI_Comm *nc),
       P(comm, nnodes, index, edges, reorder, nc), nc, SUFFIX_NONE)
CREATE(Dist_graph_create, N_DIST_GRAPH_CREATE, "dist_graph",
       P(MPI_Comm comm, int n_, const int sources[], const int degrees[], const int dests[], const int weights[],
	 MPI_Info info, int reorder, MPI_Comm *nc),
       P(comm, n_, sources, degrees, dests, weights, info, reorder, nc), nc, SUFFIX_NONE)
CREATE(Dist_graph_create_adjacent, N_DIST_GRAPH_CREATE, "dist_graph",
       P(MPI_Comm comm, int indeg, const int sources[], const int sw[], int outdeg, const int dests[], const int dw[],
	 MPI_Info info, int reorder, MPI_Comm *nc),
       P(comm, indeg, sources, sw, outdeg, dests, dw, info, reorder, nc), nc, SUFFIX_NONE)

/* MPI_Comm_create_group is collective over the group only, so it is not
 * one of the parent's collectives: named after its tag and lowest rank. */
int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *nc)
{
	if (!LIVE())
		return PMPI_Comm_create_group(comm, group, tag, nc);
	int rc = PMPI_Comm_create_group(comm, group, tag, nc);
	if (rc == MPI_SUCCESS)
		created(cp_comm(comm), "group", tag, *nc, SUFFIX_LOWEST);
	return rc;
}

/* MPI_Comm_idup is collective over its parent when it is called, like
 * MPI_Comm_dup, but its communicator exists only once the request
 * completes: it is named at the call (PARENT/dupN, N counting alike with
 * the blocking calls) and registered at its completion. */
int MPI_Comm_idup(MPI_Comm comm, MPI_Comm *nc, MPI_Request *req)
{
	if (!ON())
		return PMPI_Comm_idup(comm, nc, req);
	struct cp_call k;
	struct cp_comm *c = begin(&k, comm);
	int32_t n = next_child(c);
	k.start = cp_now();
	int rc = PMPI_Comm_idup(comm, nc, req);
	if (rc == MPI_SUCCESS) {
		struct cp_req q = {.ev = coll_event(&k, N_COMM_DUP, 0, 0, -1), .c = c, .makes = 1, .made = *nc,
				   .made_n = n};
		cp_req_add(*req, &q);
	}
	return rc;
}

/* intercomm_names counts the intercommunicators made between two groups,
 * by a hash of the groups' members. */
static struct {
	pthread_mutex_t mu;
	uint64_t hash[256];
	int32_t n[256];
	int len;
} inters = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* name_inter names an intercommunicator alike in both of its groups:
 * "inter:A-B.HASH.N", A and B the groups' lowest world ranks (the lower
 * first), HASH a hash of their members and N how many intercommunicators
 * this rank saw made between the same two groups before. */
static void name_inter(MPI_Comm nc)
{
	int ln = 0, rn = 0;
	MPI_Group lg, rg;
	PMPI_Comm_size(nc, &ln);
	PMPI_Comm_remote_size(nc, &rn);
	int *w = malloc(sizeof(int) * (size_t)(ln + rn + 1));
	if (w == NULL)
		return;
	PMPI_Comm_group(nc, &lg);
	PMPI_Comm_remote_group(nc, &rg);
	cp_group_world(lg, ln, w);
	cp_group_world(rg, rn, w + ln);
	PMPI_Group_free(&lg);
	PMPI_Group_free(&rg);
	int low[2] = {-1, -1};
	for (int i = 0; i < ln + rn; i++) {
		int g = i >= ln;
		if (w[i] >= 0 && (low[g] < 0 || w[i] < low[g]))
			low[g] = w[i];
	}
	/* The group with the lower lowest rank first, on both sides. */
	int first = low[1] >= 0 && (low[0] < 0 || low[1] < low[0]);
	uint64_t h = 0xcbf29ce484222325ull;
	for (int g = 0; g < 2; g++) {
		int which = g ^ first;
		int from = which ? ln : 0, to = which ? ln + rn : ln;
		for (int i = from; i < to; i++)
			for (int b = 0; b < 4; b++)
				h = (h ^ ((unsigned)w[i] >> (8 * b) & 0xff)) * 0x100000001b3ull;
		h = (h ^ 0xff) * 0x100000001b3ull;
	}
	free(w);
	pthread_mutex_lock(&inters.mu);
	int32_t n = 0;
	int i = 0;
	while (i < inters.len && inters.hash[i] != h)
		i++;
	if (i < inters.len)
		n = ++inters.n[i];
	else if (inters.len < 256) {
		inters.hash[inters.len] = h;
		inters.n[inters.len++] = 0;
	}
	pthread_mutex_unlock(&inters.mu);
	char name[96];
	snprintf(name, sizeof name, "inter:%d-%d.%08x.%d", low[first], low[!first], (unsigned)(h >> 32), n);
	named(nc, name, 0);
}

/* MPI_Intercomm_create is collective over each group's local
 * communicator: recorded as a collective there. */
int MPI_Intercomm_create(MPI_Comm local, int lleader, MPI_Comm peer, int rleader, int tag, MPI_Comm *nc)
{
	if (!LIVE())
		return PMPI_Intercomm_create(local, lleader, peer, rleader, tag, nc);
	struct cp_call k;
	int on = ON();
	begin(&k, local);
	k.start = cp_now();
	int rc = PMPI_Intercomm_create(local, lleader, peer, rleader, tag, nc);
	if (on)
		done(&k, cp_now(), rc, N_INTERCOMM_CREATE, 0, 0, -1);
	if (rc == MPI_SUCCESS && *nc != MPI_COMM_NULL)
		name_inter(*nc);
	return rc;
}

/* MPI_Intercomm_merge is collective over the intercommunicator, whose
 * name both groups share: PARENT/mergeN. */
int MPI_Intercomm_merge(MPI_Comm inter, int high, MPI_Comm *nc)
{
	if (!LIVE())
		return PMPI_Intercomm_merge(inter, high, nc);
	struct cp_call k;
	int on = ON();
	struct cp_comm *c = begin(&k, inter);
	int32_t n = next_child(c);
	k.start = cp_now();
	int rc = PMPI_Intercomm_merge(inter, high, nc);
	if (on)
		done(&k, cp_now(), rc, N_INTERCOMM_MERGE, 0, 0, -1);
	if (rc == MPI_SUCCESS)
		created(c, "merge", n, *nc, SUFFIX_NONE);
	return rc;
}

int MPI_Comm_free(MPI_Comm *comm)
{
	MPI_Comm h = *comm;
	int rc = PMPI_Comm_free(comm);
	if (rc == MPI_SUCCESS && LIVE())
		cp_comm_forget(h);
	return rc;
}

int MPI_Comm_disconnect(MPI_Comm *comm)
{
	MPI_Comm h = *comm;
	int rc = PMPI_Comm_disconnect(comm);
	if (rc == MPI_SUCCESS && LIVE())
		cp_comm_forget(h);
	return rc;
}

int MPI_Type_free(MPI_Datatype *t)
{
	if (LIVE())
		cp_type_forget(*t);
	return PMPI_Type_free(t);
}

/* ---- the run ---- */

static void start(int64_t t, int provided)
{
	if (cp_start(t, provided))
		cp_warn("rank %d is not recorded", cp.rank);
}

int MPI_Init(int *argc, char ***argv)
{
	cp_check_mpi();
	int64_t t = cp_clock();
	int rc = PMPI_Init(argc, argv);
	if (rc == MPI_SUCCESS) {
		int provided = MPI_THREAD_SINGLE;
		PMPI_Query_thread(&provided);
		start(t, provided);
	}
	return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
	cp_check_mpi();
	int64_t t = cp_clock();
	int rc = PMPI_Init_thread(argc, argv, required, provided);
	if (rc == MPI_SUCCESS)
		start(t, *provided);
	return rc;
}

/* MPI_Pcontrol(0) pauses the recording, any other level resumes it, as
 * with mpiP and IPM; each is a mpi.pcontrol mark. A program should pause
 * and resume on every rank alike: collectives called while paused are
 * not numbered. */
int MPI_Pcontrol(const int level, ...)
{
	int from = level ? 2 : 1, to = level ? 1 : 2;
	if (atomic_compare_exchange_strong(&cp.on, &from, to)) {
		struct cp_event e = {.start = cp_now(), .value = level, .seq = -1, .peer = -1, .root = -1,
				     .name = N_MARK_PCONTROL, .kind = K_MARK};
		cp_record(&e);
	}
	return PMPI_Pcontrol(level);
}

int MPI_Finalize(void)
{
	if (!LIVE() && !cp.joined)
		return PMPI_Finalize();
	int64_t t = cp_now();
	cp_if_state(CP_IF_FINALIZING, 0);
	cp_finish_mpi();
	int rc = PMPI_Finalize();
	cp_finish(t, cp_now());
	cp_if_state(CP_IF_FINISHED, 0);
	return rc;
}

int MPI_Abort(MPI_Comm comm, int code)
{
	cp_if_state(CP_IF_ABORTED, code);
	cp_abort(code);
	return PMPI_Abort(comm, code);
}

/* commprof_pmpi_debug_memory is for tests: it writes what was recorded
 * so far, then puts in out what the library holds for the program's
 * communicators and datatypes (struct cp_memory's fields, in order). It
 * returns -1 when the library does not record. */
int commprof_pmpi_debug_memory(long long out[4])
{
	if (!LIVE())
		return -1;
	cp_buf_flush();
	struct cp_memory m;
	cp_tables_memory(&m);
	out[0] = m.comms, out[1] = m.comm_bytes, out[2] = m.table_slots, out[3] = m.dict_strings;
	return 0;
}

#pragma GCC visibility pop
