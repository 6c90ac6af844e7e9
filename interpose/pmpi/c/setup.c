/* Starting and ending a rank's recording, inside MPI_Init and
 * MPI_Finalize: the clocks, the stream, and (on rank 0) run.json.
 *
 * Clocks. Every rank reads CLOCK_MONOTONIC, the clock commprof's own
 * ranks read. Ranks that share a kernel (the same host name and boot id)
 * share that clock and need no correction. For the others rank 0
 * measures, through PMPI on a duplicate of MPI_COMM_WORLD, the offset of
 * the first rank of each other host with 16 ping-pongs, keeping the one
 * with the shortest round trip (offset = (t0 + t1)/2 - t_peer, uncertain
 * by half the round trip), and again in MPI_Finalize for the drift: the
 * same method as commprof's own ranks (interpose/session.go).
 * COMMPROF_CLOCK=measure measures every rank as if each were on a host
 * of its own.
 *
 * The COMMPROF_ variables read here are those internal/envnames names for
 * the Go side.
 */
#define _GNU_SOURCE
#include "cp.h"
#include "schema.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef CP_VERSION
#define CP_VERSION "dev"
#endif

struct cp_state cp = {.fd = -1};

const char *const cp_kind_names[K_COUNT] = {
	"collective", "send", "recv", "compute", "step", "mark", "wait", "reduce", "sample",
};

const char *const cp_names[N_COUNT] = {
	[N_ALLREDUCE] = "allreduce",
	[N_BROADCAST] = "broadcast",
	[N_REDUCE] = "reduce",
	[N_ALLGATHER] = "allgather",
	[N_ALLGATHERV] = "allgatherv",
	[N_GATHER] = "gather",
	[N_GATHERV] = "gatherv",
	[N_SCATTER] = "scatter",
	[N_SCATTERV] = "scatterv",
	[N_REDUCESCATTER] = "reducescatter",
	[N_REDUCESCATTERV] = "reducescatterv",
	[N_ALLTOALL] = "alltoall",
	[N_ALLTOALLV] = "alltoallv",
	[N_ALLTOALLW] = "alltoallw",
	[N_BARRIER] = "barrier",
	[N_SCAN] = "scan",
	[N_EXSCAN] = "exscan",
	[N_SENDRECV] = "sendrecv",
	[N_COMM_SPLIT] = "comm_split",
	[N_COMM_SPLIT_TYPE] = "comm_split_type",
	[N_COMM_DUP] = "comm_dup",
	[N_COMM_CREATE] = "comm_create",
	[N_COMM_CREATE_GROUP] = "comm_create_group",
	[N_CART_CREATE] = "cart_create",
	[N_CART_SUB] = "cart_sub",
	[N_GRAPH_CREATE] = "graph_create",
	[N_DIST_GRAPH_CREATE] = "dist_graph_create",
	[N_INTERCOMM_CREATE] = "intercomm_create",
	[N_INTERCOMM_MERGE] = "intercomm_merge",
	[N_MARK_INIT] = "mpi.init",
	[N_MARK_FINALIZE] = "mpi.finalize",
	[N_MARK_COMM] = "mpi.comm",
	[N_MARK_ABORT] = "mpi.abort",
	[N_MARK_LOST] = "mpi.lost",
	[N_MARK_PCONTROL] = "mpi.pcontrol",
	[N_SAMPLE_RSS] = "rss_bytes",
	[N_SAMPLE_PEAK_RSS] = "peak_rss_bytes",
	[N_SAMPLE_CPU_USER] = "cpu_user_ns",
	[N_SAMPLE_CPU_SYSTEM] = "cpu_system_ns",
	[N_SAMPLE_ENERGY_PKG] = "energy_pkg_uj",
	[N_SAMPLE_ENERGY_DRAM] = "energy_dram_uj",
	[N_SAMPLE_SCHED_WAIT] = "sched_wait_ns",
	[N_SAMPLE_ENERGY_GPU0] = "energy_gpu0_uj",
	[N_SAMPLE_ENERGY_GPU0 + 1] = "energy_gpu1_uj",
	[N_SAMPLE_ENERGY_GPU0 + 2] = "energy_gpu2_uj",
	[N_SAMPLE_ENERGY_GPU0 + 3] = "energy_gpu3_uj",
	[N_SAMPLE_ENERGY_GPU0 + 4] = "energy_gpu4_uj",
	[N_SAMPLE_ENERGY_GPU0 + 5] = "energy_gpu5_uj",
	[N_SAMPLE_ENERGY_GPU0 + 6] = "energy_gpu6_uj",
	[N_SAMPLE_ENERGY_GPU_LAST] = "energy_gpu7_uj",
};

void cp_warn(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	fprintf(stderr, "commprof: %s\n", msg);
}

const char *cp_library_version(void)
{
	static char v[MPI_MAX_LIBRARY_VERSION_STRING + 1];
	if (v[0] == 0) {
		int n = 0;
		PMPI_Get_library_version(v, &n);
		/* Its first line, with tabs as spaces: "MPICH Version: 4.0.2". */
		v[strcspn(v, "\r\n")] = 0;
		for (char *p = v; *p; p++)
			if (*p == '\t')
				*p = ' ';
		for (char *p = v, *q = v;; p++) {
			if (*p == ' ' && (q == v || q[-1] == ' '))
				continue;
			*q++ = *p;
			if (*p == 0)
				break;
		}
	}
	return v;
}

/* The MPI libraries loaded: those that define PMPI_Init, found through
 * every loaded object (a Python extension's dependencies included). */
struct mpis {
	void *base[4];
	char name[4][256];
	int n;
};

static int find_mpi(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct mpis *m = arg;
	void *h = dlopen(info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : NULL, RTLD_LAZY | RTLD_NOLOAD);
	if (h == NULL)
		return 0;
	void *sym = dlsym(h, "PMPI_Init");
	Dl_info where;
	if (sym != NULL && dladdr(sym, &where) && where.dli_fbase != NULL) {
		int seen = 0;
		for (int i = 0; i < m->n; i++)
			seen |= m->base[i] == where.dli_fbase;
		if (!seen && m->n < 4) {
			m->base[m->n] = where.dli_fbase;
			snprintf(m->name[m->n], sizeof m->name[0], "%s", where.dli_fname ? where.dli_fname : "?");
			m->n++;
		}
	}
	dlclose(h);
	return 0;
}

void cp_check_mpi(void)
{
	struct mpis m = {.n = 0};
	dl_iterate_phdr(find_mpi, &m);
	if (m.n < 2)
		return;
	/* The library calls PMPI_ functions with the handles of the MPI it
	 * was built for; a program of another MPI would fail in ways that say
	 * nothing of why. */
	Dl_info ours;
	const char *self = dladdr((void *)cp_check_mpi, &ours) && ours.dli_fname ? ours.dli_fname : "the commprof PMPI library";
	cp_warn("two MPI libraries are loaded, %s and %s: the program uses another MPI than %s was built for, "
		"which cannot record it; record it with the library of its MPI (commprof record --mpi openmpi|mpich)",
		m.name[0], m.name[1], self);
	_exit(1);
}

/* Host facts every rank gathers from every other. */
struct host {
	char name[256];
	char boot[48];
	int32_t pid;
	int32_t pad;
};

/* What rank 0 keeps for run.json. */
static struct {
	struct host *hosts;
	int64_t *off, *unc, *at, *off2, *unc2, *at2;
	int *domain; /* each rank's clock domain: the first rank sharing its clock */
	int measured; /* some rank's clock was measured */
	char run_id[256], name[256];
	struct timespec start, end;
	char *command; /* a JSON array */
	const char *launcher;
} M;

enum { TAG_CLOCK = 7001, PINGS = 16 };

static int leader(int r) { return M.domain[r] == r && M.domain[r] != M.domain[0]; }

/* measure runs the ping-pongs: rank 0 with each other clock domain's
 * first rank. Rank 0 gets off, unc and at (the peer's trace time of the
 * best ping) of each leader. */
static void measure(int64_t *off, int64_t *unc, int64_t *at)
{
	int64_t t[2];
	if (cp.rank == 0) {
		for (int r = 1; r < cp.size; r++) {
			if (!leader(r))
				continue;
			int64_t best = INT64_MAX;
			for (int i = 0; i < PINGS; i++) {
				int64_t t0 = cp_clock();
				t[0] = t0;
				PMPI_Send(t, 2, MPI_INT64_T, r, TAG_CLOCK, cp.priv);
				PMPI_Recv(t, 2, MPI_INT64_T, r, TAG_CLOCK, cp.priv, MPI_STATUS_IGNORE);
				int64_t t1 = cp_clock();
				if (t1 - t0 < best) {
					best = t1 - t0;
					/* The peer read its clock (t[1]) halfway through. */
					off[r] = (t0 + t1) / 2 - t[1];
					unc[r] = best / 2;
					at[r] = t[1] - cp.epoch;
				}
			}
		}
	} else if (leader(cp.rank)) {
		for (int i = 0; i < PINGS; i++) {
			PMPI_Recv(t, 2, MPI_INT64_T, 0, TAG_CLOCK, cp.priv, MPI_STATUS_IGNORE);
			t[1] = cp_clock();
			PMPI_Send(t, 2, MPI_INT64_T, 0, TAG_CLOCK, cp.priv);
		}
	}
	if (cp.rank == 0) /* the other ranks of a domain share its leader's clock */
		for (int r = 1; r < cp.size; r++)
			if (M.domain[r] != r) {
				off[r] = off[M.domain[r]];
				unc[r] = unc[M.domain[r]];
				at[r] = at[M.domain[r]];
			}
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

static void json_time(FILE *f, const struct timespec *ts)
{
	struct tm tm;
	gmtime_r(&ts->tv_sec, &tm);
	fprintf(f, "\"%04d-%02d-%02dT%02d:%02d:%02d.%09ldZ\"", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
		tm.tm_hour, tm.tm_min, tm.tm_sec, ts->tv_nsec);
}

/* manifest_lock takes the lock every writer of run.json holds while it
 * rewrites it (internal/rundir's .commprof-manifest, with flock): a lock
 * taken on a file its holder removed just before is dropped and taken
 * again on the one now there. It returns the locked descriptor, or -1. */
static int manifest_lock(void)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/.commprof-manifest", cp.dir);
	for (;;) {
		int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0)
			return -1;
		struct stat held, now;
		if (flock(fd, LOCK_EX) != 0 || fstat(fd, &held) != 0) {
			close(fd);
			return -1;
		}
		if (stat(path, &now) == 0 && now.st_dev == held.st_dev && now.st_ino == held.st_ino)
			return fd;
		close(fd);
	}
}

/* write_manifest writes run.json (rank 0): the run as far as MPI knows it.
 * commprof record rewrites it after the launcher exits, adding what only
 * it knows (docs/mpi.md). Both hold the same lock while they write. */
static void write_manifest(const char *status)
{
	char path[4200], tmp[4300];
	snprintf(path, sizeof path, "%s/run.json", cp.dir);
	snprintf(tmp, sizeof tmp, "%s/run.json.tmp%d", cp.dir, cp.pid);
	int lk = manifest_lock();
	if (lk < 0) {
		cp_warn("locking %s: %s", path, strerror(errno));
		return;
	}
	FILE *f = fopen(tmp, "w");
	if (f == NULL) {
		cp_warn("writing %s: %s", path, strerror(errno));
		close(lk);
		return;
	}
	int64_t uncertainty = 0;
	for (int r = 0; r < cp.size; r++)
		if (M.unc[r] > uncertainty)
			uncertainty = M.unc[r];
	fprintf(f, "{\n  \"format_version\": %d,\n  \"commprof_version\": ", CP_FORMAT_VERSION);
	json_str(f, CP_VERSION);
	fprintf(f, ",\n  \"run_id\": ");
	json_str(f, M.run_id);
	fprintf(f, ",\n  \"name\": ");
	json_str(f, M.name);
	fprintf(f, ",\n  \"world_size\": %d,\n  \"launcher\": ", cp.size);
	json_str(f, M.launcher);
	fprintf(f, ",\n  \"command\": %s,\n  \"codec\": \"none\",\n  \"start\": ", M.command);
	json_time(f, &M.start);
	if (M.end.tv_sec) {
		fprintf(f, ",\n  \"end\": ");
		json_time(f, &M.end);
	}
	fprintf(f, ",\n  \"status\": \"%s\",\n  \"clock\": {\"method\": \"%s\", \"uncertainty_ns\": %lld},\n  \"ranks\": [",
		status, M.measured ? "ping-pong" : "same-host", (long long)uncertainty);
	for (int r = 0; r < cp.size; r++) {
		double drift = 0;
		if (M.at2[r] > M.at[r] && leader(M.domain[r]))
			drift = (double)(M.off2[r] - M.off[r]) / (double)(M.at2[r] - M.at[r]);
		fprintf(f, "%s\n    {\"rank\": %d, \"host\": ", r ? "," : "", r);
		json_str(f, M.hosts[r].name);
		fprintf(f, ", \"pid\": %d, \"file\": \"rank-%05d.arrows\", \"clock_offset_ns\": %lld, "
			   "\"clock_uncertainty_ns\": %lld, \"synced_at_ns\": %lld, \"clock_drift\": %.17g}",
			M.hosts[r].pid, r, (long long)M.off[r], (long long)M.unc[r], (long long)M.at[r], drift);
	}
	fprintf(f, "\n  ],\n  \"source\": {\"format\": \"pmpi\", \"tool\": ");
	json_str(f, cp_library_version());
	fprintf(f, ", \"collective_messages\": false, \"missing\": [\"messages inside the MPI library's collective algorithms\"]}\n}\n");
	int bad = ferror(f);
	if (fclose(f) || bad || rename(tmp, path)) {
		cp_warn("writing %s: %s", path, strerror(errno));
		unlink(tmp);
	}
	close(lk);
}

/* command returns the recorded command line as a JSON array:
 * COMMPROF_COMMAND (set by commprof record), else this process's. */
static char *command(void)
{
	const char *c = getenv("COMMPROF_COMMAND");
	size_t n = c ? strlen(c) : 0;
	if (n >= 2 && c[0] == '[' && c[n - 1] == ']')
		return strdup(c);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (f == NULL)
		return strdup("[]");
	fputc('[', f);
	FILE *in = fopen("/proc/self/cmdline", "r");
	if (in != NULL) {
		char arg[4096];
		size_t k = 0;
		int ch, first = 1;
		while ((ch = fgetc(in)) != EOF) {
			if (ch != 0 && k < sizeof arg - 1) {
				arg[k++] = (char)ch;
				continue;
			}
			if (ch == 0) {
				arg[k] = 0;
				if (!first)
					fputc(',', f);
				json_str(f, arg);
				first = 0;
				k = 0;
			}
		}
		fclose(in);
	}
	fputc(']', f);
	fclose(f);
	return buf;
}

int64_t cp_parse_duration(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	if (end == s || v <= 0)
		return -1;
	static const struct {
		const char *unit;
		double ns;
	} units[] = {{"ns", 1}, {"us", 1e3}, {"\xc2\xb5s", 1e3}, {"ms", 1e6}, {"s", 1e9}, {"m", 60e9}, {"h", 3600e9}};
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
		if (strcmp(end, units[i].unit) == 0)
			return (int64_t)(v * units[i].ns);
	return -1;
}

static void read_line(const char *path, char *out, size_t n)
{
	out[0] = 0;
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return;
	if (fgets(out, (int)n, f) == NULL)
		out[0] = 0;
	out[strcspn(out, "\n")] = 0;
	fclose(f);
}

static int mkdirs(const char *dir)
{
	char p[4096];
	snprintf(p, sizeof p, "%s", dir);
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = 0;
			if (mkdir(p, 0755) && errno != EEXIST)
				return -1;
			*s = '/';
		}
	if (mkdir(p, 0755) && errno != EEXIST)
		return -1;
	return 0;
}

static void at_exit(void)
{
	/* The program ended without MPI_Finalize: keep what it recorded. The
	 * stream gets no end-of-stream marker, so readers say it was cut. */
	if (cp.pid != getpid() || !(atomic_exchange(&cp.on, 0) || cp.finishing))
		return;
	cp_sample_stop();
	cp_buf_stop(0);
}

static void at_fork_child(void)
{
	/* A forked child is not a rank: it records nothing. */
	atomic_store(&cp.on, 0);
	cp.fd = -1;
}

static void mark(int name, int32_t comm, int64_t at, int64_t seq, double value)
{
	struct cp_event e = {.start = at, .seq = seq, .value = value, .peer = -1, .root = -1,
			     .name = name, .comm = comm, .kind = K_MARK};
	cp_record(&e);
}

/* wait_for completes r within the set-up's time limit; 0 on success. */
static int wait_for(MPI_Request *r, int64_t deadline)
{
	for (;;) {
		int done = 0;
		if (PMPI_Test(r, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
			return -1;
		if (done)
			return 0;
		if (cp_clock() > deadline)
			return -1;
		struct timespec ms = {0, 1000000};
		nanosleep(&ms, NULL);
	}
}

/* handshake makes the library's communicator and checks that every rank
 * records: a rank that did not load the library (LD_PRELOAD not passed
 * to another host) or has no COMMPROF_TRACE_DIR would never join the
 * set-up's collectives, and the others would wait for it forever. Within
 * COMMPROF_JOIN_TIMEOUT (60s) every rank must have joined; otherwise the
 * ranks that did record nothing, and say why. */
static int handshake(void)
{
	int64_t limit = 60000000000;
	const char *t = getenv("COMMPROF_JOIN_TIMEOUT");
	if (t && *t && (limit = cp_parse_duration(t)) <= 0) {
		cp_warn("COMMPROF_JOIN_TIMEOUT=%s: want a duration such as 60s; waiting 60s", t);
		limit = 60000000000;
	}
	int64_t deadline = cp_clock() + limit;
	MPI_Request r;
	int one = 1, all = 0;
	if (PMPI_Comm_idup(MPI_COMM_WORLD, &cp.priv, &r) != MPI_SUCCESS || wait_for(&r, deadline) ||
	    PMPI_Iallreduce(&one, &all, 1, MPI_INT, MPI_SUM, cp.priv, &r) != MPI_SUCCESS || wait_for(&r, deadline)) {
		cp_warn("rank %d: not every rank joined the recording within %.0fs: does every rank load the library "
			"and have COMMPROF_TRACE_DIR set? (with Open MPI across hosts: mpirun -x LD_PRELOAD -x COMMPROF_TRACE_DIR)",
			cp.rank, (double)limit / 1e9);
		return -1;
	}
	return all == cp.size ? 0 : -1;
}

int cp_start(int64_t init_start, int provided)
{
	const char *dir = getenv("COMMPROF_TRACE_DIR");
	if (dir == NULL || dir[0] == 0)
		return 0;
	snprintf(cp.dir, sizeof cp.dir, "%s", dir);
	cp.mt = provided == MPI_THREAD_MULTIPLE;
	cp.pid = getpid();
	cp.flush_ns = 1000000000;
	const char *fl = getenv("COMMPROF_FLUSH");
	if (fl && *fl && (cp.flush_ns = cp_parse_duration(fl)) <= 0) {
		cp_warn("COMMPROF_FLUSH=%s: want a duration such as 1s or 50ms; flushing every second", fl);
		cp.flush_ns = 1000000000;
	}
	PMPI_Comm_rank(MPI_COMM_WORLD, &cp.rank);
	PMPI_Comm_size(MPI_COMM_WORLD, &cp.size);
	if (handshake())
		return -1;
	if (cp_ipc_check()) {
		cp_warn("this library's schema.h does not match its encoder; rebuild it");
		return -1;
	}
	cp_dict_add(D_DTYPE, "");
	cp_dict_add(D_COMM, "");
	if (cp_tables_init())
		return -1;

	/* Who shares a clock with whom. */
	struct host me = {.pid = cp.pid};
	gethostname(me.name, sizeof me.name - 1);
	read_line("/proc/sys/kernel/random/boot_id", me.boot, sizeof me.boot);
	const char *ck = getenv("COMMPROF_CLOCK");
	int force = ck && strcmp(ck, "measure") == 0;
	M.hosts = calloc((size_t)cp.size, sizeof *M.hosts);
	M.domain = calloc((size_t)cp.size, sizeof *M.domain);
	int64_t *arrays = calloc(6 * (size_t)cp.size, sizeof(int64_t));
	if (M.hosts == NULL || M.domain == NULL || arrays == NULL)
		return -1;
	M.off = arrays, M.unc = arrays + cp.size, M.at = arrays + 2 * cp.size;
	M.off2 = arrays + 3 * cp.size, M.unc2 = arrays + 4 * cp.size, M.at2 = arrays + 5 * cp.size;
	PMPI_Allgather(&me, sizeof me, MPI_BYTE, M.hosts, sizeof me, MPI_BYTE, cp.priv);
	for (int r = 0; r < cp.size; r++) {
		M.domain[r] = r;
		for (int q = 0; q < r && !force; q++)
			if (strcmp(M.hosts[q].name, M.hosts[r].name) == 0 && strcmp(M.hosts[q].boot, M.hosts[r].boot) == 0) {
				M.domain[r] = q;
				break;
			}
		if (r > 0 && leader(r))
			M.measured = 1;
	}

	/* The epoch, the run's id and name, from rank 0. */
	struct {
		int64_t epoch;
		char run_id[256];
	} hello = {0};
	if (cp.rank == 0) {
		hello.epoch = cp_clock();
		const char *id = getenv("COMMPROF_RUN_ID");
		const char *name = getenv("COMMPROF_RUN_NAME");
		const char *base = strrchr(cp.dir, '/');
		snprintf(M.name, sizeof M.name, "%.255s", name && *name ? name : base && base[1] ? base + 1 : cp.dir);
		if (id && *id)
			snprintf(hello.run_id, sizeof hello.run_id, "%s", id);
		else {
			unsigned char rnd[6] = {0};
			int fd = open("/dev/urandom", O_RDONLY);
			if (fd < 0 || read(fd, rnd, sizeof rnd) != (ssize_t)sizeof rnd)
				memcpy(rnd, &hello.epoch, sizeof rnd);
			if (fd >= 0)
				close(fd);
			snprintf(hello.run_id, sizeof hello.run_id, "%.200s-%02x%02x%02x%02x%02x%02x", M.name, rnd[0], rnd[1],
				 rnd[2], rnd[3], rnd[4], rnd[5]);
		}
		clock_gettime(CLOCK_REALTIME, &M.start);
		M.launcher = getenv("OMPI_COMM_WORLD_SIZE") ? "openmpi"
			     : getenv("PMI_SIZE") || getenv("PMI_RANK") ? "pmi"
			     : getenv("SLURM_PROCID") ? "slurm"
						       : "mpi";
		M.command = command();
	}
	PMPI_Bcast(&hello, sizeof hello, MPI_BYTE, 0, cp.priv);
	cp.epoch = hello.epoch;
	snprintf(M.run_id, sizeof M.run_id, "%s", hello.run_id);
	measure(M.off, M.unc, M.at);
	int64_t mine[3];
	PMPI_Scatter(arrays, 1, MPI_INT64_T, &mine[0], 1, MPI_INT64_T, 0, cp.priv);
	cp.offset = mine[0];
	/* From here on every rank takes part in MPI_Finalize's measurement,
	 * whether or not it records: a rank that cannot write its stream
	 * must not leave rank 0 waiting for its ping. */
	cp.joined = 1;

	/* The stream. */
	char path[4200];
	snprintf(path, sizeof path, "%s/rank-%05d.arrows", cp.dir, cp.rank);
	if (mkdirs(cp.dir)) {
		cp_warn("rank %d: creating the run directory %s: %s; not recording", cp.rank, cp.dir, strerror(errno));
		return -1;
	}
	cp.fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (cp.fd < 0) {
		cp_warn("rank %d: creating %s: %s (is the run directory reused?); not recording", cp.rank, path,
			strerror(errno));
		return -1;
	}
	if (cp_ipc_schema(cp.fd, cp.rank, cp.size, cp.pid, cp.offset, me.name, M.run_id) || cp_buf_start()) {
		cp_warn("rank %d: writing %s: %s; not recording", cp.rank, path, strerror(errno));
		close(cp.fd);
		cp.fd = -1;
		return -1;
	}
	if (cp.rank == 0)
		write_manifest("running");
	atexit(at_exit);
	pthread_atfork(NULL, NULL, at_fork_child);
	cp_if_open(me.name);
	cp_inject_init();

	int64_t now = cp_now();
	mark(N_MARK_COMM, cp_world.id, now, cp_world.rank, cp_world.size);
	mark(N_MARK_INIT, 0, now, -1, (double)(cp_clock() - init_start) / 1e9);
	atomic_store(&cp.on, 1);
	/* The first rank of each host reads its energy counters. */
	int first = cp.rank;
	for (int q = 0; q < cp.rank && first == cp.rank; q++)
		if (strcmp(M.hosts[q].name, me.name) == 0 && strcmp(M.hosts[q].boot, me.boot) == 0)
			first = q;
	cp_sample_start(first == cp.rank);
	return 0;
}

void cp_finish_mpi(void)
{
	if (!cp.joined)
		return;
	cp.joined = 0;
	int recording = atomic_exchange(&cp.on, 0) != 0;
	measure(M.off2, M.unc2, M.at2);
	if (cp.rank == 0)
		clock_gettime(CLOCK_REALTIME, &M.end);
	PMPI_Comm_free(&cp.priv);
	cp.finishing = recording;
}

void cp_finish(int64_t called, int64_t done)
{
	if (!cp.finishing)
		return;
	cp.finishing = 0;
	cp_sample_stop();
	mark(N_MARK_FINALIZE, 0, called, -1, (double)(done - called) / 1e9);
	int64_t lost = atomic_load(&cp.lost);
	if (lost > 0)
		mark(N_MARK_LOST, 0, done, -1, (double)lost);
	cp_buf_stop(1);
	if (cp.rank == 0)
		write_manifest("complete");
}

void cp_abort(int code)
{
	if (!atomic_exchange(&cp.on, 0))
		return;
	cp_sample_stop();
	mark(N_MARK_ABORT, 0, cp_now(), -1, code);
	cp_buf_stop(0);
}
