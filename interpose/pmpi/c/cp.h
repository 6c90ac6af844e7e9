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
 * tables.c (communicators, datatypes, requests, matched messages),
 * setup.c (MPI_Init and MPI_Finalize: clocks, the stream, run.json),
 * sample.c (the sampling thread: memory, CPU time, energy),
 * wrap.c (the MPI functions), fortran.c (Open MPI's Fortran entry points,
 * which call wrap.c's functions).
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
	K_SAMPLE,
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
	N_INTERCOMM_CREATE,
	N_INTERCOMM_MERGE,
	N_MARK_INIT,
	N_MARK_FINALIZE,
	N_MARK_COMM,
	N_MARK_ABORT,
	N_MARK_LOST,
	N_MARK_PCONTROL,
	N_SAMPLE_RSS, /* sample.c's counters, in this order */
	N_SAMPLE_PEAK_RSS,
	N_SAMPLE_CPU_USER,
	N_SAMPLE_CPU_SYSTEM,
	N_SAMPLE_ENERGY_PKG,
	N_SAMPLE_ENERGY_DRAM,
	N_SAMPLE_SCHED_WAIT,
	N_SAMPLE_ENERGY_GPU0, /* NVML: energy_gpu0_uj .. energy_gpu7_uj */
	N_SAMPLE_ENERGY_GPU_LAST = N_SAMPLE_ENERGY_GPU0 + 7,
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
	int mt;            /* MPI_THREAD_MULTIPLE: the request and message tables take a spin lock */
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

/* ON: recording. LIVE: recording or paused by MPI_Pcontrol(0), when the
 * library still follows the communicators and datatypes a program makes. */
#define ON() __builtin_expect(atomic_load_explicit(&cp.on, memory_order_relaxed) == 1, 1)
#define LIVE() (atomic_load_explicit(&cp.on, memory_order_relaxed) != 0)

/* buf.c */
CP_HIDDEN int cp_buf_start(void);              /* starts the flush thread; 0 on success */
CP_HIDDEN void cp_buf_stop(int end_of_stream); /* stops it and writes what is left */
CP_HIDDEN void cp_record(const struct cp_event *e);
CP_HIDDEN int32_t cp_dict_add(int d, const char *s); /* registers a string: its id, or the "other" id when full */
CP_HIDDEN int64_t cp_buf_events(void);
CP_HIDDEN void cp_buf_flush(void);             /* writes what was recorded so far, now */
CP_HIDDEN int64_t cp_dict_held(int d);         /* strings of dictionary d held in memory */
CP_HIDDEN void cp_dict_value(int d, int32_t id, char *out, size_t n); /* the string of id, if still held */

/* ipc.c */
struct cp_cols;
CP_HIDDEN int cp_ipc_schema(int fd, int rank, int size, int pid, int64_t offset, const char *host, const char *run_id);
CP_HIDDEN int cp_ipc_dictionary(int fd, long long id, const char *const *values, size_t n, int delta);
CP_HIDDEN int cp_ipc_batch(int fd, const struct cp_event *const *evs, size_t n, int rank);
CP_HIDDEN int cp_ipc_end(int fd);
CP_HIDDEN long long cp_ipc_dict_id(int column); /* the dictionary id of column (schema order) */
CP_HIDDEN int cp_ipc_check(void);               /* 0 if schema.h has the columns this code writes */

/* tables.c: communicators. A description lives while its handle is
 * registered or a request or message taken on it is outstanding: each
 * holds a reference (cp_comm_ref, cp_comm_unref). */
struct cp_comm {
	uintptr_t key;   /* the handle */
	int32_t id;      /* its name's dictionary id */
	int size, rank;  /* its size, this rank's rank in it */
	int inter;       /* an intercommunicator: peers are ranks of the remote group */
	int *world;      /* world rank of each rank (of the remote group for an intercommunicator) */
	_Atomic int64_t seq;     /* collectives called on it so far */
	_Atomic int32_t created; /* communicators created from it so far (their names count these) */
	_Atomic int32_t refs;    /* the table's and outstanding requests' */
	char *name;
};
/* The longest communicator name: a longer one (communicators made from
 * communicators made from ...) keeps its last part and replaces the rest
 * with a hash of it, which every rank computes alike. */
#define CP_NAME_MAX 96
CP_HIDDEN struct cp_comm *cp_comm(MPI_Comm c);
CP_HIDDEN struct cp_comm *cp_comm_add(MPI_Comm c, const char *name, int lowest_suffix);
CP_HIDDEN void cp_comm_forget(MPI_Comm c);
CP_HIDDEN void cp_comm_ref(const struct cp_comm *c);
CP_HIDDEN void cp_comm_unref(const struct cp_comm *c);
CP_HIDDEN int cp_group_world(MPI_Group g, int n, int *world); /* world ranks of g's n ranks */
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

/* requests: what a non-blocking call started, until a completion call
 * sees it end. The entry holds a reference to c, which cp_req_take passes
 * to its caller (who drops it with cp_comm_unref). */
struct cp_req {
	uintptr_t key;
	struct cp_event ev;     /* kind, name, comm, seq, bytes, peer, root, dtype, start */
	const struct cp_comm *c; /* to turn a received message's source into a world rank */
	int64_t tested;         /* when an MPI_Test... first found it unfinished, 0 if none did */
	int makes;              /* 1 for MPI_Comm_idup's: */
	MPI_Comm made;          /* the communicator it makes (both MPIs return its handle at the call) */
	int32_t made_n;         /* and its number among its parent's */
};
CP_HIDDEN void cp_req_add(MPI_Request r, const struct cp_req *q);
CP_HIDDEN int cp_req_take(MPI_Request r, struct cp_req *out); /* 1 if r was tracked (and is no more) */
CP_HIDDEN void cp_req_tested(MPI_Request r, int64_t t);       /* an MPI_Test... found r unfinished at t */
/* matched messages (MPI_Mprobe, MPI_Improbe): the receive they begin, until
 * MPI_Mrecv or MPI_Imrecv takes it; entries as requests' */
CP_HIDDEN void cp_msg_add(MPI_Message m, const struct cp_req *q);
CP_HIDDEN int cp_msg_take(MPI_Message m, struct cp_req *out);
CP_HIDDEN int cp_tables_init(void);

/* What the library holds for the program's communicators and datatypes
 * (commprof_pmpi_debug_memory reports it, for tests). */
struct cp_memory {
	int64_t comms;        /* communicator descriptions alive */
	int64_t comm_bytes;   /* their bytes */
	int64_t table_slots;  /* slots of the communicator and datatype tables, old ones kept included */
	int64_t dict_strings; /* communicator names not yet written, or kept */
};
CP_HIDDEN void cp_tables_memory(struct cp_memory *m);

/* wrap.c: the parts of a call's recording that fortran.c shares. */
struct cp_call {
	int64_t start, seq;
	const struct cp_comm *c;
	int mismatch; /* an injected mismatch replaces this call (inject.c) */
};
CP_HIDDEN const struct cp_comm *cp_begin(struct cp_call *k, MPI_Comm comm); /* numbers a collective */
CP_HIDDEN void cp_started(const struct cp_call *k, int rc, MPI_Request req, int name, int64_t bytes, int32_t dtype,
			  int root); /* remembers a non-blocking collective that started */

/* inflight.c: the rank's in-flight state, a mapped file that record and
 * doctor read (trace/inflight.go has its layout). States: */
enum { CP_IF_STARTING, CP_IF_COMPUTING, CP_IF_BLOCKED, CP_IF_FINALIZING, CP_IF_FINISHED, CP_IF_ABORTED };
/* Kinds of call: */
enum { CP_IFK_COLLECTIVE, CP_IFK_SEND, CP_IFK_RECV, CP_IFK_WAIT, CP_IFK_OTHER };
CP_HIDDEN void cp_if_open(const char *host);
/* Times are the caller's cp_now() readings, so that the state costs no
 * clock reading of its own. */
CP_HIDDEN void cp_if_enter(int kind, const char *op, const struct cp_comm *c, int64_t seq, int64_t bytes, int32_t dtype,
			   int32_t root, int32_t peer, MPI_Op redop, int64_t now);
CP_HIDDEN void cp_if_exit(int rc, int64_t now); /* the call entered last returned rc */
CP_HIDDEN void cp_if_progress(int64_t now);     /* a request completed outside a blocking call */
CP_HIDDEN void cp_if_state(int state, int64_t code);

/* inject.c: COMMPROF_INJECT's hang, mismatch and kill faults for this rank */
CP_HIDDEN void cp_inject_init(void);
CP_HIDDEN int cp_inject_call(void);    /* at each collective call: hangs here, or 1 if a mismatch replaces it */
CP_HIDDEN void cp_inject_entered(void); /* the call is entered: a kill acts */
CP_HIDDEN void cp_inject_plan(int name, int64_t bytes, int *made, int64_t *made_bytes);
CP_HIDDEN int cp_inject_mismatch(int made, int64_t bytes, int root, MPI_Comm comm);

/* sample.c: a thread that records the process's resident memory and CPU
 * time (and, when energy is set, the host's RAPL energy counters) as
 * sample events, at the start, every COMMPROF_SAMPLE and at the stop. */
CP_HIDDEN void cp_sample_start(int energy);
CP_HIDDEN void cp_sample_stop(void); /* takes the last sample; idempotent */
CP_HIDDEN int64_t cp_parse_duration(const char *s); /* ns, or -1 */

/* setup.c */
CP_HIDDEN int cp_start(int64_t init_start, int provided);
CP_HIDDEN void cp_finish_mpi(void);                 /* in MPI_Finalize, before PMPI_Finalize */
CP_HIDDEN void cp_finish(int64_t called, int64_t done); /* after it */
CP_HIDDEN void cp_abort(int code);
CP_HIDDEN void cp_check_mpi(void); /* exits if the program uses another MPI than the library's */
CP_HIDDEN void cp_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
CP_HIDDEN const char *cp_library_version(void);

#endif
