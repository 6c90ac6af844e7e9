/* The rank's in-flight state: a small file in the run directory,
 * inflight/rank-NNNNN.bin, mapped into memory and rewritten at every
 * call's entry and return, so that `commprof record` and `commprof
 * doctor` can read which call a rank is blocked in without the rank's
 * help (it is stuck). A call costs a few stores into the mapping and no
 * system call. The layout is trace/inflight.go's, which reads it; the
 * file is written with a sequence counter that is odd while a write is
 * under way, so that a reader can tell a torn copy.
 *
 * With MPI_THREAD_MULTIPLE the one slot shows the call last entered or
 * left by any thread.
 */
#include "cp.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The last collective calls a rank returned from (the ring). */
struct cp_recent {
	int64_t seq, bytes;
	int32_t root, error;
	char op[16], comm[32], dtype[16], redop[8];
};

/* Offsets of trace/inflight.go (little-endian, 1536 bytes). */
struct cp_inflight {
	char magic[8];       /* "CPINFL01" */
	uint32_t version;    /* 1 */
	uint32_t size;       /* 1536 */
	int32_t rank, world, pid, state;
	_Atomic uint64_t gen; /* odd while being written */
	int64_t completed;   /* calls returned so far */
	int64_t entry_ns;    /* the call's entry, trace time (ns since the run's epoch) */
	int64_t entry_unix;  /* the same, wall clock, ns since 1970 */
	int64_t exit_unix;   /* the last return, wall clock */
	int64_t seq, bytes;  /* the call's sequence number on its communicator (-1: none), its bytes */
	int32_t root, peer;  /* world ranks, -1 where none, -2: any source */
	int32_t comm_size, kind;
	char op[24], dtype[32], redop[16], comm[96], host[64];
	int64_t exit_ns;     /* the last return, trace time */
	int64_t code;        /* MPI_Abort's error code */
	int32_t members;     /* how many world ranks the communicator holds; -1: not known */
	int32_t pad;
	uint8_t member[128]; /* bit r: world rank r belongs to it (ranks below 1024) */
	int32_t error;       /* the last call's error code, 0 (MPI_SUCCESS) if it succeeded */
	char reserved[20];
	int64_t recent_n;    /* collective calls returned so far: the ring holds the last 8 */
	struct cp_recent recent[8];
	char reserved2[248];
};
_Static_assert(sizeof(struct cp_recent) == 96, "a recent call is 96 bytes");
_Static_assert(sizeof(struct cp_inflight) == 1536, "the in-flight file is 1536 bytes");

static struct cp_inflight scratch_if; /* written when the file could not be made */
static struct cp_inflight *F = &scratch_if;
static uintptr_t last_comm;
static int32_t last_comm_id = -1;
static char dtypes[128][32]; /* dtype dictionary id -> name, as first seen */
static int64_t to_unix;      /* add to a cp_now() reading for the wall clock, ns since 1970 */

static inline void begin_write(void)
{
	atomic_fetch_add_explicit(&F->gen, 1, memory_order_acq_rel);
}

static inline void end_write(void)
{
	atomic_fetch_add_explicit(&F->gen, 1, memory_order_release);
}

static inline int64_t unix_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void copy(char *dst, size_t n, const char *src)
{
	size_t i = 0;
	for (; src && src[i] && i + 1 < n; i++)
		dst[i] = src[i];
	memset(dst + i, 0, n - i);
}

void cp_if_open(const char *host)
{
	char dir[4200], path[4300];
	snprintf(dir, sizeof dir, "%s/inflight", cp.dir);
	if (mkdir(dir, 0755) && errno != EEXIST) {
		cp_warn("rank %d: creating %s: %s; the in-flight state is not kept", cp.rank, dir, strerror(errno));
		return;
	}
	snprintf(path, sizeof path, "%s/rank-%05d.bin", dir, cp.rank);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || ftruncate(fd, sizeof(struct cp_inflight))) {
		cp_warn("rank %d: creating %s: %s; the in-flight state is not kept", cp.rank, path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	void *m = mmap(NULL, sizeof(struct cp_inflight), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED) {
		cp_warn("rank %d: mapping %s: %s; the in-flight state is not kept", cp.rank, path, strerror(errno));
		return;
	}
	struct cp_inflight *f = m;
	f->gen = 1;
	f->version = 1;
	f->size = sizeof *f;
	f->rank = cp.rank, f->world = cp.size, f->pid = cp.pid;
	f->state = CP_IF_COMPUTING;
	f->seq = -1, f->root = -1, f->peer = -1, f->members = -1;
	f->exit_ns = cp_now();
	to_unix = unix_ns() - f->exit_ns;
	f->exit_unix = f->exit_ns + to_unix;
	copy(f->host, sizeof f->host, host);
	memcpy(f->magic, "CPINFL01", 8);
	atomic_store_explicit(&f->gen, 2, memory_order_release);
	F = f;
}

static const char *redop_name(MPI_Op op)
{
	static const struct {
		MPI_Op op;
		const char *name;
	} ops[] = {{MPI_SUM, "sum"},   {MPI_PROD, "prod"}, {MPI_MAX, "max"},   {MPI_MIN, "min"},
		   {MPI_LAND, "land"}, {MPI_LOR, "lor"},   {MPI_LXOR, "lxor"}, {MPI_BAND, "band"},
		   {MPI_BOR, "bor"},   {MPI_BXOR, "bxor"}, {MPI_MAXLOC, "maxloc"}, {MPI_MINLOC, "minloc"},
		   {MPI_REPLACE, "replace"}};
	if (op == MPI_OP_NULL)
		return "";
	for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
		if (ops[i].op == op)
			return ops[i].name;
	return "user";
}

static void set_comm(const struct cp_comm *c)
{
	if (c == NULL) {
		if (last_comm != 0) {
			F->comm[0] = 0, F->comm_size = 0, F->members = -1;
			last_comm = 0, last_comm_id = -1;
		}
		return;
	}
	if (last_comm == (uintptr_t)c && last_comm_id == c->id)
		return;
	last_comm = (uintptr_t)c, last_comm_id = c->id;
	copy(F->comm, sizeof F->comm, c->name);
	F->comm_size = c->size;
	memset(F->member, 0, sizeof F->member);
	F->members = -1;
	if (c->inter || c->world == NULL)
		return;
	for (int i = 0; i < c->size; i++) {
		int w = c->world[i];
		if (w < 0 || w >= 1024)
			return;
		F->member[w >> 3] |= (uint8_t)(1u << (w & 7));
	}
	F->members = c->size;
}

void cp_if_enter(int kind, const char *op, const struct cp_comm *c, int64_t seq, int64_t bytes, int32_t dtype,
		 int32_t root, int32_t peer, MPI_Op redop, int64_t t)
{
	int64_t u = t + to_unix;
	begin_write();
	F->state = CP_IF_BLOCKED;
	F->kind = kind;
	copy(F->op, sizeof F->op, op);
	set_comm(c);
	F->seq = seq, F->bytes = bytes, F->root = root, F->peer = peer;
	if (dtype > 0 && dtype < 128) {
		if (dtypes[dtype][0] == 0)
			cp_dict_value(D_DTYPE, dtype, dtypes[dtype], sizeof dtypes[dtype]);
		memcpy(F->dtype, dtypes[dtype], sizeof F->dtype);
	} else {
		F->dtype[0] = 0;
	}
	copy(F->redop, sizeof F->redop, redop_name(redop));
	F->entry_ns = t, F->entry_unix = u;
	F->error = 0;
	end_write();
	cp_inject_entered();
}

void cp_if_exit(int rc, int64_t t)
{
	int64_t u = t + to_unix;
	begin_write();
	F->state = CP_IF_COMPUTING;
	F->error = rc;
	if (F->kind == CP_IFK_COLLECTIVE) {
		struct cp_recent *r = &F->recent[F->recent_n % 8];
		r->seq = F->seq, r->bytes = F->bytes, r->root = F->root, r->error = rc;
		memcpy(r->op, F->op, sizeof r->op - 1), r->op[sizeof r->op - 1] = 0;
		memcpy(r->comm, F->comm, sizeof r->comm - 1), r->comm[sizeof r->comm - 1] = 0;
		memcpy(r->dtype, F->dtype, sizeof r->dtype - 1), r->dtype[sizeof r->dtype - 1] = 0;
		memcpy(r->redop, F->redop, sizeof r->redop - 1), r->redop[sizeof r->redop - 1] = 0;
		F->recent_n++;
	}
	F->completed++;
	F->exit_ns = t, F->exit_unix = u;
	end_write();
}

void cp_if_progress(int64_t t)
{
	begin_write();
	F->completed++;
	F->exit_unix = t + to_unix;
	end_write();
}

void cp_if_state(int state, int64_t code)
{
	begin_write();
	F->state = state;
	F->code = code;
	if (state == CP_IF_FINALIZING) /* the fields keep the last call */
		F->entry_ns = cp_now(), F->entry_unix = F->entry_ns + to_unix;
	end_write();
}
