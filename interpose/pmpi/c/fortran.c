/* Open MPI's Fortran entry points.
 *
 * Open MPI's Fortran bindings (libmpi_mpifh, which `mpif.h` and
 * `use mpi` programs call, and libmpi_usempif08, which calls its
 * ompi_*_f functions for `use mpi_f08` programs) call PMPI_* directly, so
 * wrap.c's MPI_* functions never see a Fortran program's calls. This file
 * defines the Fortran entry points themselves, as mpiP and IPM do, under
 * every name a Fortran compiler may call (mpi_send_, mpi_send__,
 * mpi_send, MPI_SEND) and Open MPI's own (ompi_send_f; and pmpi_test_ and
 * the like where mpi_f08 calls those): each converts the
 * Fortran handles to C ones, the Fortran sentinels (MPI_IN_PLACE,
 * MPI_BOTTOM, MPI_STATUS(ES)_IGNORE) to C's, calls wrap.c's MPI_*
 * function, and converts back what it returns. A program preloads this
 * library before Open MPI's, so these are the definitions its calls find.
 *
 * MPICH's Fortran bindings call the C MPI_* functions, which wrap.c
 * defines already: this file is empty in MPICH's build.
 *
 * Assumptions, as Open MPI's own bindings make them: INTEGER is C's int
 * (checked when this is built), a LOGICAL is C's int, true when not 0,
 * and a LOGICAL this file returns is 1 for true (gfortran's .TRUE., and
 * Open MPI's when built with gfortran as Debian's is).
 */
#define _GNU_SOURCE
#include "cp.h"

#if defined(OPEN_MPI) && OPEN_MPI

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(MPI_Fint) == sizeof(int), "a Fortran INTEGER is not a C int: the count arrays would need copies");

/* The sentinels are data symbols of Open MPI's libmpi, named as its
 * Fortran compiler names common blocks: one of these four spellings. A
 * weak reference to each finds the one that exists (the others are 0). */
#define SENTINEL(lower, UPPER)                                           \
	extern char lower __attribute__((weak));                          \
	extern char lower##_ __attribute__((weak));                       \
	extern char lower##__ __attribute__((weak));                      \
	extern char UPPER __attribute__((weak));                          \
	static inline int is_##lower(const void *p)                       \
	{                                                                 \
		return p != NULL && (p == (void *)&lower || p == (void *)&lower##_ || \
				     p == (void *)&lower##__ || p == (void *)&UPPER); \
	}
SENTINEL(mpi_fortran_in_place, MPI_FORTRAN_IN_PLACE)
SENTINEL(mpi_fortran_bottom, MPI_FORTRAN_BOTTOM)
SENTINEL(mpi_fortran_status_ignore, MPI_FORTRAN_STATUS_IGNORE)
SENTINEL(mpi_fortran_statuses_ignore, MPI_FORTRAN_STATUSES_IGNORE)

/* buf turns a Fortran buffer argument into C's. */
static inline void *buf(void *p)
{
	if (is_mpi_fortran_in_place(p))
		return MPI_IN_PLACE;
	if (is_mpi_fortran_bottom(p))
		return MPI_BOTTOM;
	return p;
}

#define COMM(f) PMPI_Comm_f2c(*(f))
#define TYPE(f) PMPI_Type_f2c(*(f))
#define OP(f) PMPI_Op_f2c(*(f))
#define LOGICAL(x) ((x) ? 1 : 0)

/* A Fortran status is MPI_STATUS_SIZE INTEGERs, the size of a C one. */
#define FSTATUS ((int)(sizeof(MPI_Status) / sizeof(MPI_Fint)))

static inline MPI_Status *status_in(MPI_Fint *f, MPI_Status *c)
{
	return is_mpi_fortran_status_ignore(f) ? MPI_STATUS_IGNORE : c;
}

static inline void status_out(int rc, const MPI_Status *c, MPI_Fint *f)
{
	if (rc == MPI_SUCCESS && !is_mpi_fortran_status_ignore(f))
		PMPI_Status_c2f(c, f);
}

/* Per-thread room for the C handles and statuses of the calls over
 * arrays; grown, never shrunk. */
static __thread struct {
	MPI_Request *req;
	MPI_Status *st;
	MPI_Datatype *ty;
	int cap;
} fs __attribute__((tls_model("initial-exec")));

static int room(int n)
{
	if (n <= fs.cap)
		return 0;
	int cap = fs.cap ? fs.cap : 64;
	while (cap < n)
		cap *= 2;
	MPI_Request *r = realloc(fs.req, sizeof *r * (size_t)cap);
	if (r == NULL)
		return -1;
	fs.req = r;
	MPI_Status *s = realloc(fs.st, sizeof *s * (size_t)cap);
	if (s == NULL)
		return -1;
	fs.st = s;
	MPI_Datatype *t = realloc(fs.ty, sizeof *t * 2 * (size_t)cap);
	if (t == NULL)
		return -1;
	fs.ty = t;
	fs.cap = cap;
	return 0;
}

#pragma GCC visibility push(default)

/* F defines a Fortran entry point under all its names. */
#define F(lower, UPPER, PARAMS)                                                   \
	void ompi_##lower##_f PARAMS;                                             \
	void mpi_##lower PARAMS __attribute__((alias("ompi_" #lower "_f")));      \
	void mpi_##lower##_ PARAMS __attribute__((alias("ompi_" #lower "_f")));   \
	void mpi_##lower##__ PARAMS __attribute__((alias("ompi_" #lower "_f")));  \
	void MPI_##UPPER PARAMS __attribute__((alias("ompi_" #lower "_f")));      \
	void ompi_##lower##_f PARAMS

/* FP defines one whose PMPI names Open MPI's mpi_f08 module calls (those
 * of calls with LOGICAL arguments, through Open MPI's Fortran PMPI
 * layer): under those too. */
#define FP(lower, UPPER, PARAMS)                                                  \
	void pmpi_##lower PARAMS __attribute__((alias("ompi_" #lower "_f")));     \
	void pmpi_##lower##_ PARAMS __attribute__((alias("ompi_" #lower "_f")));  \
	void pmpi_##lower##__ PARAMS __attribute__((alias("ompi_" #lower "_f"))); \
	void PMPI_##UPPER PARAMS __attribute__((alias("ompi_" #lower "_f")));     \
	F(lower, UPPER, PARAMS)

/* REQ runs a call that starts a request c_ and returns it to Fortran. */
#define REQ(CALL)                                                  \
	do {                                                       \
		MPI_Request c_;                                    \
		int rc_ = (CALL);                                  \
		if (rc_ == MPI_SUCCESS)                            \
			*req = PMPI_Request_c2f(c_);               \
		*ierr = rc_;                                       \
	} while (0)

typedef MPI_Fint FI;

/* ---- collectives ---- */

F(allreduce, ALLREDUCE, (void *s, void *r, FI *count, FI *dt, FI *op, FI *comm, FI *ierr))
{
	*ierr = MPI_Allreduce(buf(s), buf(r), *count, TYPE(dt), OP(op), COMM(comm));
}
F(iallreduce, IALLREDUCE, (void *s, void *r, FI *count, FI *dt, FI *op, FI *comm, FI *req, FI *ierr))
{
	REQ(MPI_Iallreduce(buf(s), buf(r), *count, TYPE(dt), OP(op), COMM(comm), &c_));
}
F(bcast, BCAST, (void *b, FI *count, FI *dt, FI *root, FI *comm, FI *ierr))
{
	*ierr = MPI_Bcast(buf(b), *count, TYPE(dt), *root, COMM(comm));
}
F(ibcast, IBCAST, (void *b, FI *count, FI *dt, FI *root, FI *comm, FI *req, FI *ierr))
{
	REQ(MPI_Ibcast(buf(b), *count, TYPE(dt), *root, COMM(comm), &c_));
}
F(reduce, REDUCE, (void *s, void *r, FI *count, FI *dt, FI *op, FI *root, FI *comm, FI *ierr))
{
	*ierr = MPI_Reduce(buf(s), buf(r), *count, TYPE(dt), OP(op), *root, COMM(comm));
}
F(ireduce, IREDUCE, (void *s, void *r, FI *count, FI *dt, FI *op, FI *root, FI *comm, FI *req, FI *ierr))
{
	REQ(MPI_Ireduce(buf(s), buf(r), *count, TYPE(dt), OP(op), *root, COMM(comm), &c_));
}
F(allgather, ALLGATHER, (void *s, FI *sc, FI *st, void *r, FI *rc, FI *rt, FI *comm, FI *ierr))
{
	*ierr = MPI_Allgather(buf(s), *sc, TYPE(st), buf(r), *rc, TYPE(rt), COMM(comm));
}
F(iallgather, IALLGATHER, (void *s, FI *sc, FI *st, void *r, FI *rc, FI *rt, FI *comm, FI *req, FI *ierr))
{
	REQ(MPI_Iallgather(buf(s), *sc, TYPE(st), buf(r), *rc, TYPE(rt), COMM(comm), &c_));
}
F(allgatherv, ALLGATHERV, (void *s, FI *sc, FI *st, void *r, FI *rcs, FI *displs, FI *rt, FI *comm, FI *ierr))
{
	*ierr = MPI_Allgatherv(buf(s), *sc, TYPE(st), buf(r), rcs, displs, TYPE(rt), COMM(comm));
}
F(iallgatherv, IALLGATHERV,
  (void *s, FI *sc, FI *st, void *r, FI *rcs, FI *displs, FI *rt, FI *comm, FI *req, FI *ierr))
{
	REQ(MPI_Iallgatherv(buf(s), *sc, TYPE(st), buf(r), rcs, displs, TYPE(rt), COMM(comm), &c_));
}
F(gather, GATHER, (void *s, FI *sc, FI *st, void *r, FI *rc, FI *rt, FI *root, FI *comm, FI *ierr))
{
	*ierr = MPI_Gather(buf(s), *sc, TYPE(st), buf(r), *rc, TYPE(rt), *root, COMM(comm));
}
F(igather, IGATHER, (void *s, FI *sc, FI *st, void *r, FI *rc, FI *rt, FI *root, FI *comm, FI *req, FI *ierr))
{
	REQ(MPI_Igather(buf(s), *sc, TYPE(st), buf(r), *rc, TYPE(rt), *root, COMM(comm), &c_));
}
F(gatherv, GATHERV,
  (void *s, FI *sc, FI *st, void *r, FI *rcs, FI *displs, FI *rt, FI *root, FI *comm, FI *ierr))
{
	*ierr = MPI_Gatherv(buf(s), *sc, TYPE(st), buf(r), rcs, displs, TYPE(rt), *root, COMM(comm));
}
F(igatherv, IGATHERV,
  (void *s, FI *sc, FI *st, void *r, FI *rcs, FI *displs, FI *rt, FI *root, FI *comm, FI *req, FI *ierr))
{
	REQ(MPI_Igatherv(buf(s), *sc, TYPE(st), buf(r), rcs, displs, TYPE(rt), *root, COMM(comm), &c_));
}
F(scatter, SCATTER, (void *s, FI *sc, FI *st, void *r, FI *rc, FI *rt, FI *root, FI *comm, FI *ierr))
{
	*ierr = MPI_Scatter(buf(s), *sc, TYPE(st), buf(r), *rc, TYPE(rt), *root, COMM(comm));
}
F(iscatter, ISCATTER, (void *s, FI *sc, FI *st, void *r, FI *rc, FI *rt, FI *root, FI *comm, FI *req, FI *ierr))
{
	REQ(MPI_Iscatter(buf(s), *sc, TYPE(st), buf(r), *rc, TYPE(rt), *root, COMM(comm), &c_));
}
F(scatterv, SCATTERV,
  (void *s, FI *scs, FI *displs, FI *st, void *r, FI *rc, FI *rt, FI *root, FI *comm, FI *ierr))
{
	*ierr = MPI_Scatterv(buf(s), scs, displs, TYPE(st), buf(r), *rc, TYPE(rt), *root, COMM(comm));
}
F(iscatterv, ISCATTERV,
  (void *s, FI *scs, FI *displs, FI *st, void *r, FI *rc, FI *rt, FI *root, FI *comm, FI *req, FI *ierr))
{
	REQ(MPI_Iscatterv(buf(s), scs, displs, TYPE(st), buf(r), *rc, TYPE(rt), *root, COMM(comm), &c_));
}
F(reduce_scatter_block, REDUCE_SCATTER_BLOCK, (void *s, void *r, FI *rc, FI *dt, FI *op, FI *comm, FI *ierr))
{
	*ierr = MPI_Reduce_scatter_block(buf(s), buf(r), *rc, TYPE(dt), OP(op), COMM(comm));
}
F(ireduce_scatter_block, IREDUCE_SCATTER_BLOCK,
  (void *s, void *r, FI *rc, FI *dt, FI *op, FI *comm, FI *req, FI *ierr))
{
	REQ(MPI_Ireduce_scatter_block(buf(s), buf(r), *rc, TYPE(dt), OP(op), COMM(comm), &c_));
}
F(reduce_scatter, REDUCE_SCATTER, (void *s, void *r, FI *rcs, FI *dt, FI *op, FI *comm, FI *ierr))
{
	*ierr = MPI_Reduce_scatter(buf(s), buf(r), rcs, TYPE(dt), OP(op), COMM(comm));
}
F(ireduce_scatter, IREDUCE_SCATTER, (void *s, void *r, FI *rcs, FI *dt, FI *op, FI *comm, FI *req, FI *ierr))
{
	REQ(MPI_Ireduce_scatter(buf(s), buf(r), rcs, TYPE(dt), OP(op), COMM(comm), &c_));
}
F(alltoall, ALLTOALL, (void *s, FI *sc, FI *st, void *r, FI *rc, FI *rt, FI *comm, FI *ierr))
{
	*ierr = MPI_Alltoall(buf(s), *sc, TYPE(st), buf(r), *rc, TYPE(rt), COMM(comm));
}
F(ialltoall, IALLTOALL, (void *s, FI *sc, FI *st, void *r, FI *rc, FI *rt, FI *comm, FI *req, FI *ierr))
{
	REQ(MPI_Ialltoall(buf(s), *sc, TYPE(st), buf(r), *rc, TYPE(rt), COMM(comm), &c_));
}
F(alltoallv, ALLTOALLV, (void *s, FI *scs, FI *sd, FI *st, void *r, FI *rcs, FI *rd, FI *rt, FI *comm, FI *ierr))
{
	*ierr = MPI_Alltoallv(buf(s), scs, sd, TYPE(st), buf(r), rcs, rd, TYPE(rt), COMM(comm));
}
F(ialltoallv, IALLTOALLV,
  (void *s, FI *scs, FI *sd, FI *st, void *r, FI *rcs, FI *rd, FI *rt, FI *comm, FI *req, FI *ierr))
{
	REQ(MPI_Ialltoallv(buf(s), scs, sd, TYPE(st), buf(r), rcs, rd, TYPE(rt), COMM(comm), &c_));
}

/* peers is the number of entries of a communicator's per-peer arrays. */
static int peers(MPI_Comm c)
{
	int inter = 0, n = 0;
	PMPI_Comm_test_inter(c, &inter);
	if (inter)
		PMPI_Comm_remote_size(c, &n);
	else
		PMPI_Comm_size(c, &n);
	return n;
}

F(alltoallw, ALLTOALLW, (void *s, FI *scs, FI *sd, FI *sts, void *r, FI *rcs, FI *rd, FI *rts, FI *comm, FI *ierr))
{
	MPI_Comm c = COMM(comm);
	int n = peers(c);
	if (room(n)) {
		*ierr = MPI_ERR_NO_MEM;
		return;
	}
	MPI_Datatype *cs = fs.ty, *cr = fs.ty + n;
	for (int i = 0; i < n; i++) {
		cs[i] = is_mpi_fortran_in_place(s) ? MPI_DATATYPE_NULL : PMPI_Type_f2c(sts[i]);
		cr[i] = PMPI_Type_f2c(rts[i]);
	}
	*ierr = MPI_Alltoallw(buf(s), scs, sd, is_mpi_fortran_in_place(s) ? NULL : cs, buf(r), rcs, rd, cr, c);
}

/* MPI_Ialltoallw's arrays of types must live until it completes: Open
 * MPI's own binding keeps its C copies with the request, so this one
 * records around it instead of calling MPI_Ialltoallw. */
typedef void ialltoallw_f(void *, FI *, FI *, FI *, void *, FI *, FI *, FI *, FI *, FI *, FI *);
F(ialltoallw, IALLTOALLW,
  (void *s, FI *scs, FI *sd, FI *sts, void *r, FI *rcs, FI *rd, FI *rts, FI *comm, FI *req, FI *ierr))
{
	static _Atomic(ialltoallw_f *) next;
	ialltoallw_f *f = atomic_load_explicit(&next, memory_order_relaxed);
	if (f == NULL) {
		f = (ialltoallw_f *)dlsym(RTLD_NEXT, "ompi_ialltoallw_f");
		atomic_store_explicit(&next, f, memory_order_relaxed);
	}
	if (f == NULL) {
		*ierr = MPI_ERR_INTERN;
		return;
	}
	struct cp_call k;
	if (!ON() || cp_begin(&k, COMM(comm)) == NULL) {
		f(s, scs, sd, sts, r, rcs, rd, rts, comm, req, ierr);
		return;
	}
	int in_place = is_mpi_fortran_in_place(s), n = peers(COMM(comm));
	int64_t bytes = 0;
	for (int i = 0; i < n; i++)
		bytes += (int64_t)(in_place ? rcs[i] : scs[i]) * cp_type(PMPI_Type_f2c(in_place ? rts[i] : sts[i])).size;
	k.start = cp_now();
	f(s, scs, sd, sts, r, rcs, rd, rts, comm, req, ierr);
	if (*ierr == MPI_SUCCESS)
		cp_started(&k, MPI_SUCCESS, PMPI_Request_f2c(*req), N_ALLTOALLW, bytes, 0, -1);
}

F(barrier, BARRIER, (FI *comm, FI *ierr)) { *ierr = MPI_Barrier(COMM(comm)); }
F(ibarrier, IBARRIER, (FI *comm, FI *req, FI *ierr)) { REQ(MPI_Ibarrier(COMM(comm), &c_)); }
F(scan, SCAN, (void *s, void *r, FI *count, FI *dt, FI *op, FI *comm, FI *ierr))
{
	*ierr = MPI_Scan(buf(s), buf(r), *count, TYPE(dt), OP(op), COMM(comm));
}
F(iscan, ISCAN, (void *s, void *r, FI *count, FI *dt, FI *op, FI *comm, FI *req, FI *ierr))
{
	REQ(MPI_Iscan(buf(s), buf(r), *count, TYPE(dt), OP(op), COMM(comm), &c_));
}
F(exscan, EXSCAN, (void *s, void *r, FI *count, FI *dt, FI *op, FI *comm, FI *ierr))
{
	*ierr = MPI_Exscan(buf(s), buf(r), *count, TYPE(dt), OP(op), COMM(comm));
}
F(iexscan, IEXSCAN, (void *s, void *r, FI *count, FI *dt, FI *op, FI *comm, FI *req, FI *ierr))
{
	REQ(MPI_Iexscan(buf(s), buf(r), *count, TYPE(dt), OP(op), COMM(comm), &c_));
}

/* ---- point-to-point ---- */

#define FSEND(lower, UPPER, NAME)                                                             \
	F(lower, UPPER, (void *b, FI *count, FI *dt, FI *dest, FI *tag, FI *comm, FI *ierr))  \
	{                                                                                     \
		*ierr = MPI_##NAME(buf(b), *count, TYPE(dt), *dest, *tag, COMM(comm));        \
	}
FSEND(send, SEND, Send)
FSEND(ssend, SSEND, Ssend)
FSEND(bsend, BSEND, Bsend)
FSEND(rsend, RSEND, Rsend)

#define FISEND(lower, UPPER, NAME)                                                                     \
	F(lower, UPPER, (void *b, FI *count, FI *dt, FI *dest, FI *tag, FI *comm, FI *req, FI *ierr))  \
	{                                                                                              \
		REQ(MPI_##NAME(buf(b), *count, TYPE(dt), *dest, *tag, COMM(comm), &c_));               \
	}
FISEND(isend, ISEND, Isend)
FISEND(issend, ISSEND, Issend)
FISEND(ibsend, IBSEND, Ibsend)
FISEND(irsend, IRSEND, Irsend)

F(recv, RECV, (void *b, FI *count, FI *dt, FI *src, FI *tag, FI *comm, FI *status, FI *ierr))
{
	MPI_Status c;
	*ierr = MPI_Recv(buf(b), *count, TYPE(dt), *src, *tag, COMM(comm), status_in(status, &c));
	status_out(*ierr, &c, status);
}
F(irecv, IRECV, (void *b, FI *count, FI *dt, FI *src, FI *tag, FI *comm, FI *req, FI *ierr))
{
	REQ(MPI_Irecv(buf(b), *count, TYPE(dt), *src, *tag, COMM(comm), &c_));
}
F(sendrecv, SENDRECV,
  (void *sb, FI *sc, FI *st, FI *dest, FI *stag, void *rb, FI *rc, FI *rt, FI *src, FI *rtag, FI *comm, FI *status,
   FI *ierr))
{
	MPI_Status c;
	*ierr = MPI_Sendrecv(buf(sb), *sc, TYPE(st), *dest, *stag, buf(rb), *rc, TYPE(rt), *src, *rtag, COMM(comm),
			     status_in(status, &c));
	status_out(*ierr, &c, status);
}
F(sendrecv_replace, SENDRECV_REPLACE,
  (void *b, FI *count, FI *dt, FI *dest, FI *stag, FI *src, FI *rtag, FI *comm, FI *status, FI *ierr))
{
	MPI_Status c;
	*ierr = MPI_Sendrecv_replace(buf(b), *count, TYPE(dt), *dest, *stag, *src, *rtag, COMM(comm),
				     status_in(status, &c));
	status_out(*ierr, &c, status);
}
F(mprobe, MPROBE, (FI *src, FI *tag, FI *comm, FI *msg, FI *status, FI *ierr))
{
	MPI_Status c;
	MPI_Message m;
	*ierr = MPI_Mprobe(*src, *tag, COMM(comm), &m, status_in(status, &c));
	if (*ierr == MPI_SUCCESS)
		*msg = PMPI_Message_c2f(m);
	status_out(*ierr, &c, status);
}
FP(improbe, IMPROBE, (FI *src, FI *tag, FI *comm, FI *flag, FI *msg, FI *status, FI *ierr))
{
	MPI_Status c;
	MPI_Message m;
	int got = 0;
	*ierr = MPI_Improbe(*src, *tag, COMM(comm), &got, &m, status_in(status, &c));
	if (*ierr == MPI_SUCCESS) {
		*flag = LOGICAL(got);
		if (got) {
			*msg = PMPI_Message_c2f(m);
			status_out(*ierr, &c, status);
		}
	}
}
F(mrecv, MRECV, (void *b, FI *count, FI *dt, FI *msg, FI *status, FI *ierr))
{
	MPI_Status c;
	MPI_Message m = PMPI_Message_f2c(*msg);
	*ierr = MPI_Mrecv(buf(b), *count, TYPE(dt), &m, status_in(status, &c));
	if (*ierr == MPI_SUCCESS)
		*msg = PMPI_Message_c2f(m);
	status_out(*ierr, &c, status);
}
F(imrecv, IMRECV, (void *b, FI *count, FI *dt, FI *msg, FI *req, FI *ierr))
{
	MPI_Message m = PMPI_Message_f2c(*msg);
	REQ(MPI_Imrecv(buf(b), *count, TYPE(dt), &m, &c_));
	if (*ierr == MPI_SUCCESS)
		*msg = PMPI_Message_c2f(m);
}

/* ---- completions ---- */

F(wait, WAIT, (FI *req, FI *status, FI *ierr))
{
	MPI_Status c;
	MPI_Request r = PMPI_Request_f2c(*req);
	*ierr = MPI_Wait(&r, status_in(status, &c));
	if (*ierr == MPI_SUCCESS)
		*req = PMPI_Request_c2f(r);
	status_out(*ierr, &c, status);
}
FP(test, TEST, (FI *req, FI *flag, FI *status, FI *ierr))
{
	MPI_Status c;
	MPI_Request r = PMPI_Request_f2c(*req);
	int done = 0;
	*ierr = MPI_Test(&r, &done, status_in(status, &c));
	if (*ierr != MPI_SUCCESS)
		return;
	*req = PMPI_Request_c2f(r);
	*flag = LOGICAL(done);
	if (done)
		status_out(*ierr, &c, status);
}

/* requests_in copies n Fortran requests into fs.req; requests_out puts
 * back the C handles of those the call changed (the first n, or those
 * at the 0-based indices idx[0..n)). */
static int requests_in(int n, const FI *reqs)
{
	if (room(n))
		return -1;
	for (int i = 0; i < n; i++)
		fs.req[i] = PMPI_Request_f2c(reqs[i]);
	return 0;
}

static void statuses_out(int n, FI *statuses)
{
	if (is_mpi_fortran_statuses_ignore(statuses))
		return;
	for (int i = 0; i < n; i++)
		PMPI_Status_c2f(&fs.st[i], statuses + (size_t)i * FSTATUS);
}

F(waitall, WAITALL, (FI *count, FI *reqs, FI *statuses, FI *ierr))
{
	int n = *count;
	if (requests_in(n, reqs)) {
		*ierr = MPI_ERR_NO_MEM;
		return;
	}
	*ierr = MPI_Waitall(n, fs.req, fs.st);
	if (*ierr != MPI_SUCCESS && *ierr != MPI_ERR_IN_STATUS)
		return;
	for (int i = 0; i < n; i++)
		reqs[i] = PMPI_Request_c2f(fs.req[i]);
	statuses_out(n, statuses);
}
FP(testall, TESTALL, (FI *count, FI *reqs, FI *flag, FI *statuses, FI *ierr))
{
	int n = *count, done = 0;
	if (requests_in(n, reqs)) {
		*ierr = MPI_ERR_NO_MEM;
		return;
	}
	*ierr = MPI_Testall(n, fs.req, &done, fs.st);
	if (*ierr != MPI_SUCCESS && *ierr != MPI_ERR_IN_STATUS)
		return;
	*flag = LOGICAL(done);
	for (int i = 0; i < n; i++)
		reqs[i] = PMPI_Request_c2f(fs.req[i]);
	if (done)
		statuses_out(n, statuses);
}
F(waitany, WAITANY, (FI *count, FI *reqs, FI *index, FI *status, FI *ierr))
{
	MPI_Status c;
	int n = *count, i = MPI_UNDEFINED;
	if (requests_in(n, reqs)) {
		*ierr = MPI_ERR_NO_MEM;
		return;
	}
	*ierr = MPI_Waitany(n, fs.req, &i, status_in(status, &c));
	if (*ierr != MPI_SUCCESS)
		return;
	if (i != MPI_UNDEFINED)
		reqs[i] = PMPI_Request_c2f(fs.req[i]);
	*index = i == MPI_UNDEFINED ? MPI_UNDEFINED : i + 1;
	status_out(*ierr, &c, status);
}
FP(testany, TESTANY, (FI *count, FI *reqs, FI *index, FI *flag, FI *status, FI *ierr))
{
	MPI_Status c;
	int n = *count, i = MPI_UNDEFINED, done = 0;
	if (requests_in(n, reqs)) {
		*ierr = MPI_ERR_NO_MEM;
		return;
	}
	*ierr = MPI_Testany(n, fs.req, &i, &done, status_in(status, &c));
	if (*ierr != MPI_SUCCESS)
		return;
	if (i != MPI_UNDEFINED)
		reqs[i] = PMPI_Request_c2f(fs.req[i]);
	*index = i == MPI_UNDEFINED ? MPI_UNDEFINED : i + 1;
	*flag = LOGICAL(done);
	if (done)
		status_out(*ierr, &c, status);
}

/* some finishes MPI_Waitsome and MPI_Testsome: Fortran's indices count
 * from 1. */
static void some(int out, FI *reqs, FI *idx, FI *statuses)
{
	if (out == MPI_UNDEFINED)
		return;
	for (int k = 0; k < out; k++) {
		reqs[idx[k]] = PMPI_Request_c2f(fs.req[idx[k]]);
		idx[k]++;
	}
	statuses_out(out, statuses);
}

F(waitsome, WAITSOME, (FI *incount, FI *reqs, FI *outcount, FI *idx, FI *statuses, FI *ierr))
{
	if (requests_in(*incount, reqs)) {
		*ierr = MPI_ERR_NO_MEM;
		return;
	}
	*ierr = MPI_Waitsome(*incount, fs.req, outcount, idx, fs.st);
	if (*ierr == MPI_SUCCESS || *ierr == MPI_ERR_IN_STATUS)
		some(*outcount, reqs, idx, statuses);
}
FP(testsome, TESTSOME, (FI *incount, FI *reqs, FI *outcount, FI *idx, FI *statuses, FI *ierr))
{
	if (requests_in(*incount, reqs)) {
		*ierr = MPI_ERR_NO_MEM;
		return;
	}
	*ierr = MPI_Testsome(*incount, fs.req, outcount, idx, fs.st);
	if (*ierr == MPI_SUCCESS || *ierr == MPI_ERR_IN_STATUS)
		some(*outcount, reqs, idx, statuses);
}
F(request_free, REQUEST_FREE, (FI *req, FI *ierr))
{
	MPI_Request r = PMPI_Request_f2c(*req);
	*ierr = MPI_Request_free(&r);
	if (*ierr == MPI_SUCCESS)
		*req = PMPI_Request_c2f(r);
}

/* ---- communicators and datatypes ---- */

/* NEWCOMM runs a call that makes a communicator c_ and returns it. */
#define NEWCOMM(CALL)                                      \
	do {                                               \
		MPI_Comm c_ = MPI_COMM_NULL;               \
		*ierr = (CALL);                            \
		if (*ierr == MPI_SUCCESS)                  \
			*nc = PMPI_Comm_c2f(c_);           \
	} while (0)

F(comm_split, COMM_SPLIT, (FI *comm, FI *color, FI *key, FI *nc, FI *ierr))
{
	NEWCOMM(MPI_Comm_split(COMM(comm), *color, *key, &c_));
}
F(comm_split_type, COMM_SPLIT_TYPE, (FI *comm, FI *type, FI *key, FI *info, FI *nc, FI *ierr))
{
	NEWCOMM(MPI_Comm_split_type(COMM(comm), *type, *key, PMPI_Info_f2c(*info), &c_));
}
F(comm_dup, COMM_DUP, (FI *comm, FI *nc, FI *ierr)) { NEWCOMM(MPI_Comm_dup(COMM(comm), &c_)); }
F(comm_dup_with_info, COMM_DUP_WITH_INFO, (FI *comm, FI *info, FI *nc, FI *ierr))
{
	NEWCOMM(MPI_Comm_dup_with_info(COMM(comm), PMPI_Info_f2c(*info), &c_));
}
F(comm_idup, COMM_IDUP, (FI *comm, FI *nc, FI *req, FI *ierr))
{
	MPI_Comm c = MPI_COMM_NULL;
	MPI_Request r;
	*ierr = MPI_Comm_idup(COMM(comm), &c, &r);
	if (*ierr == MPI_SUCCESS) {
		*nc = PMPI_Comm_c2f(c);
		*req = PMPI_Request_c2f(r);
	}
}
F(comm_create, COMM_CREATE, (FI *comm, FI *group, FI *nc, FI *ierr))
{
	NEWCOMM(MPI_Comm_create(COMM(comm), PMPI_Group_f2c(*group), &c_));
}
F(comm_create_group, COMM_CREATE_GROUP, (FI *comm, FI *group, FI *tag, FI *nc, FI *ierr))
{
	NEWCOMM(MPI_Comm_create_group(COMM(comm), PMPI_Group_f2c(*group), *tag, &c_));
}
FP(cart_create, CART_CREATE, (FI *comm, FI *ndims, FI *dims, FI *periods, FI *reorder, FI *nc, FI *ierr))
{
	NEWCOMM(MPI_Cart_create(COMM(comm), *ndims, dims, periods, *reorder != 0, &c_));
}
FP(cart_sub, CART_SUB, (FI *comm, FI *remain, FI *nc, FI *ierr)) { NEWCOMM(MPI_Cart_sub(COMM(comm), remain, &c_)); }
F(intercomm_create, INTERCOMM_CREATE, (FI *local, FI *lleader, FI *peer, FI *rleader, FI *tag, FI *nc, FI *ierr))
{
	NEWCOMM(MPI_Intercomm_create(COMM(local), *lleader, COMM(peer), *rleader, *tag, &c_));
}
FP(intercomm_merge, INTERCOMM_MERGE, (FI *inter, FI *high, FI *nc, FI *ierr))
{
	NEWCOMM(MPI_Intercomm_merge(COMM(inter), *high != 0, &c_));
}
F(comm_free, COMM_FREE, (FI *comm, FI *ierr))
{
	MPI_Comm c = COMM(comm);
	*ierr = MPI_Comm_free(&c);
	if (*ierr == MPI_SUCCESS)
		*comm = PMPI_Comm_c2f(c);
}
F(type_free, TYPE_FREE, (FI *dt, FI *ierr))
{
	MPI_Datatype t = TYPE(dt);
	*ierr = MPI_Type_free(&t);
	if (*ierr == MPI_SUCCESS)
		*dt = PMPI_Type_c2f(t);
}

/* ---- the run ---- */

F(init, INIT, (FI *ierr))
{
	int argc = 0;
	char **argv = NULL;
	*ierr = MPI_Init(&argc, &argv);
}
F(init_thread, INIT_THREAD, (FI *required, FI *provided, FI *ierr))
{
	int argc = 0, p = MPI_THREAD_SINGLE;
	char **argv = NULL;
	*ierr = MPI_Init_thread(&argc, &argv, *required, &p);
	if (*ierr == MPI_SUCCESS)
		*provided = p;
}
F(finalize, FINALIZE, (FI *ierr)) { *ierr = MPI_Finalize(); }
F(abort, ABORT, (FI *comm, FI *code, FI *ierr)) { *ierr = MPI_Abort(COMM(comm), *code); }
F(pcontrol, PCONTROL, (FI *level)) { MPI_Pcontrol(*level); }

#pragma GCC visibility pop

#else
/* MPICH's build: its Fortran bindings call wrap.c's functions. */
typedef int cp_no_fortran_entry_points;
#endif
