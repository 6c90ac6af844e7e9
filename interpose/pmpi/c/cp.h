/* commprof's PMPI library: internal declarations.
 *
 * The library is loaded with LD_PRELOAD into every rank of an MPI program.
 * Its MPI_* functions record each call as an event and call the MPI
 * library's PMPI_* function; events go into per-thread chunks that a
 * background thread writes out as Arrow IPC record batches (ipc.c), in
 * commprof's trace format v1 (docs/trace-format.md). docs/mpi.md says
 * what is recorded and how.
 *
 * Files: cp.h (this), schema.h (generated: the schema message), ipc.c (the
 * Arrow IPC stream), buf.c (chunks, dictionaries, the flush thread),
 * tables.c (communicators, datatypes, requests), setup.c (MPI_Init and
 * MPI_Finalize: clocks, the stream, run.json), wrap.c (the MPI functions).
 */
#ifndef COMMPROF_PMPI_CP_H
#define COMMPROF_PMPI_CP_H

#include <mpi.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define CP_HIDDEN __attribute__((visibility("hidden")))

/* Event kinds: index into the kind dictionary, which is written whole
 * in this order (trace.Kind - 1). */
enum {
	K_COLLECTIVE,
	K_SEND,
	K_RECV,
	K_COMPUTE,
	K_STEP,
	K_MARK,
	K_WAIT,
	K_REDUCE,
	K_COUNT
};

/* Event names: index into the name dictionary, also written whole. */
enum {
	N_ALLREDUCE,
	N_BROADCAST,
	N_REDUCE,
	N_ALLGATHER,
	N_ALLGATHERV,
	N_GATHER,
	N_GATHERV,
	N_SCATTER,
	N_SCATTERV,
	N_REDUCESCATTER,
	N_REDUCESCATTERV,
	N_ALLTOALL,
	N_ALLTOALLV,
	N_ALLTOALLW,
	N_BARRIER,
	N_SCAN,
	N_EXSCAN,
	N_SENDRECV,
	N_COMM_SPLIT,
	N_COMM_SPLIT_TYPE,
	N_COMM_DUP,
	N_COMM_CREATE,
	N_COMM_CREATE_GROUP,
	N_CART_CREATE,
	N_CART_SUB,
	N_GRAPH_CREATE,
	N_DIST_GRAPH_CREATE,
	N_MARK_INIT,
	N_MARK_FINALIZE,
	N_MARK_COMM,
	N_MARK_ABORT,
	N_MARK_LOST,
	N_MARK_PCONTROL,
	N_COUNT
};

CP_HIDDEN extern const char *const cp_kind_names[K_COUNT];
CP_HIDDEN extern const char *const cp_names[N_COUNT];

/* One event, as recorded; a flush turns events into columns. */
struct cp_event {
	int64_t start, dur, bytes, seq, wait; /* ns, ns, bytes, -, ns */
	double value;
	int32_t peer, root, name, comm, dtype; /* name: N_*; comm, dtype: dictionary ids */
	int8_t kind;
};

/* The trace's columns, in schema order (schema.h's cp_columns, which
 * cp_ipc_check compares with these). */
enum {
	C_RANK, C_KIND, C_NAME, C_START, C_DUR, C_BYTES, C_PEER, C_SEQ, C_STEP,
	C_ALGO, C_DTYPE, C_ROOT, C_CHUNK, C_COMM, C_WAIT, C_VALUE, C_LABEL, C_NCOLS
};

/* Dictionaries that grow as the program runs (ids are indices). */
enum { D_DTYPE, D_COMM, D_COUNT };

/* The library's state. One per process; set up by MPI_Init. */
struct cp_state {
	_Atomic int on;    /* 0: off; 1: recording; 2: paused by MPI_Pcontrol(0) */
	int mt;            /* MPI_THREAD_MULTIPLE: the request table takes a lock */
	int rank, size;    /* in MPI_COMM_WORLD */
	int pid;
	int64_t epoch;     /* rank 0's CLOCK_MONOTONIC at the run's start, ns */
	int64_t offset;    /* this rank's clock offset (ns to add to put it on rank 0's) */
	int64_t flush_ns;  /* the flush thread's period */
	int fd;            /* the rank's stream */
	char dir[4096];    /* the run directory */
	MPI_Comm priv;     /* a duplicate of MPI_COMM_WORLD for the library's own messages */
	_Atomic int64_t lost; /* events not recorded: buffers full, too many requests */
	int joined;        /* took part in the set-up: takes part in MPI_Finalize's clock measurement */
	int finishing;     /* between cp_finish_mpi and cp_finish */
};

CP_HIDDEN extern struct cp_state cp;

static inline int64_t cp_clock(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* now returns the trace time: ns since the run's epoch on this rank's clock. */
static inline int64_t cp_now(void) { return cp_clock() - cp.epoch; }

/* buf.c */
CP_HIDDEN int cp_buf_start(void);              /* starts the flush thread; 0 on success */
CP_HIDDEN void cp_buf_stop(int end_of_stream); /* stops it and writes what is left */
CP_HIDDEN void cp_record(const struct cp_event *e);
CP_HIDDEN int32_t cp_dict_add(int d, const char *s); /* registers a string: its id, or the "other" id when full */
CP_HIDDEN int64_t cp_buf_events(void);

/* ipc.c */
struct cp_cols;
CP_HIDDEN int cp_ipc_schema(int fd, int rank, int size, int pid, int64_t offset, const char *host, const char *run_id);
CP_HIDDEN int cp_ipc_dictionary(int fd, long long id, const char *const *values, size_t n, int delta);
CP_HIDDEN int cp_ipc_batch(int fd, const struct cp_event *const *evs, size_t n, int rank);
CP_HIDDEN int cp_ipc_end(int fd);
CP_HIDDEN long long cp_ipc_dict_id(int column); /* the dictionary id of column (schema order) */
CP_HIDDEN int cp_ipc_check(void);               /* 0 if schema.h has the columns this code writes */

/* tables.c: communicators */
struct cp_comm {
	uintptr_t key;   /* the handle */
	int32_t id;      /* its name's dictionary id */
	int size, rank;  /* its size, this rank's rank in it */
	int inter;       /* an intercommunicator: peers are ranks of the remote group */
	int *world;      /* world rank of each rank (of the remote group for an intercommunicator) */
	_Atomic int64_t seq;     /* collectives called on it so far */
	_Atomic int32_t created; /* communicators created from it so far (their names count these) */
	char *name;
};
CP_HIDDEN struct cp_comm *cp_comm(MPI_Comm c);
CP_HIDDEN struct cp_comm *cp_comm_add(MPI_Comm c, const char *name, int lowest_suffix);
CP_HIDDEN void cp_comm_forget(MPI_Comm c);
CP_HIDDEN extern struct cp_comm cp_world;

static inline int32_t cp_world_rank(const struct cp_comm *c, int r)
{
	if (r < 0 || c == NULL || r >= c->size)
		return r < 0 ? -1 : r;
	return c->world[r];
}

/* datatypes */
struct cp_type {
	int32_t id;   /* name's dictionary id */
	int32_t size; /* MPI_Type_size */
};
CP_HIDDEN struct cp_type cp_type(MPI_Datatype t);
CP_HIDDEN void cp_type_forget(MPI_Datatype t);

/* requests: what a non-blocking call started, until a completion call sees it end */
struct cp_req {
	uintptr_t key;
	struct cp_event ev;     /* kind, name, comm, seq, bytes, peer, root, dtype, start */
	const struct cp_comm *c; /* to turn a received message's source into a world rank */
	int32_t type_size;      /* a receive's element size, for the bytes it received */
};
CP_HIDDEN void cp_req_add(MPI_Request r, const struct cp_req *q);
CP_HIDDEN int cp_req_take(MPI_Request r, struct cp_req *out); /* 1 if r was tracked (and is no more) */
CP_HIDDEN int cp_tables_init(void);

/* setup.c */
CP_HIDDEN int cp_start(int64_t init_start, int provided);
CP_HIDDEN void cp_finish_mpi(void);                 /* in MPI_Finalize, before PMPI_Finalize */
CP_HIDDEN void cp_finish(int64_t called, int64_t done); /* after it */
CP_HIDDEN void cp_abort(int code);
CP_HIDDEN void cp_check_mpi(void); /* exits if the program uses another MPI than the library's */
CP_HIDDEN void cp_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
CP_HIDDEN const char *cp_library_version(void);

#endif
