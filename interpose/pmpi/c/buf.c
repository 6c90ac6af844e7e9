/* Where events wait until they are written: per-thread chunks, a pool
 * of them, the dictionaries that grow, and the flush thread.
 *
 * A thread records into the chunk it owns: a copy and a release store of
 * the chunk's count, no lock and no allocation. When its chunk is full it
 * hands it to the flush thread and takes another from the pool (a lock
 * once per CHUNK events). The flush thread wakes every COMMPROF_FLUSH
 * (default 1s), or when a chunk fills, and writes one record batch of
 * every event recorded since its last pass: the full chunks' and the
 * prefix each thread's current chunk has published. Memory is bounded:
 * the pool holds at most MAX_CHUNKS chunks beyond one per recording
 * thread; a thread that finds none free writes the full ones itself.
 */
#define _GNU_SOURCE
#include "cp.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHUNK 4096           /* events per chunk (72 bytes each) */
#define MAX_CHUNKS 16        /* chunks beyond those threads hold */
#define MAX_BATCH 65536      /* events per record batch */

struct chunk {
	struct chunk *next;
	_Atomic size_t n; /* events recorded: the owner stores, the flusher loads */
	size_t done;      /* events written: the flusher's */
	struct cp_event ev[CHUNK];
};

/* slot is a recording thread's place: the chunk it records into. */
struct slot {
	_Atomic(struct chunk *) cur;
	struct slot *next;
	int idle; /* its thread ended; a new thread may take it */
};

static struct {
	pthread_mutex_t mu; /* the lists below */
	struct chunk *free, *full, *full_tail;
	int nfull; /* chunks in the full list */
	int spare; /* chunks allocated beyond the threads' own */
	struct slot *slots;
	pthread_key_t key; /* ends a thread's slot */

	pthread_mutex_t write_mu; /* held while the stream is written */
	int broken;               /* a write failed: events are dropped */
	int why_fd;               /* the rank's .rank-N.why file, -1 none */
	size_t why_len;
	const struct cp_event **evs;
	size_t evcap;
	int64_t written;

	pthread_mutex_t wake_mu;
	pthread_cond_t wake;
	int stop, pending;
	pthread_t thread;
	int running;
} B = {
	.mu = PTHREAD_MUTEX_INITIALIZER,
	.write_mu = PTHREAD_MUTEX_INITIALIZER,
	.wake_mu = PTHREAD_MUTEX_INITIALIZER,
	.wake = PTHREAD_COND_INITIALIZER,
	.why_fd = -1,
};

/* Why a rank stopped recording goes in .rank-NNNNN.why beside its
 * stream (commprof's Finish reads it into run.json). The file is made
 * with its space taken when the stream is, so that the cause is kept
 * when it is a full disk; a stream ended cleanly removes it. */
#define WHY_BYTES 4096

static void why_path(char *path, size_t n) { snprintf(path, n, "%s/.rank-%05d.why", cp.dir, cp.rank); }

static void why_open(void)
{
	char path[4200];
	why_path(path, sizeof path);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	static const char zero[WHY_BYTES];
	if (write(fd, zero, sizeof zero) != (ssize_t)sizeof zero) {
		close(fd);
		unlink(path);
		return;
	}
	B.why_fd = fd;
}

/* why_note writes one line of the cause over the file's reserved space. */
static void why_note(const char *line)
{
	size_t n = strlen(line);
	if (B.why_fd < 0 || B.why_len + n + 1 > WHY_BYTES)
		return;
	char buf[WHY_BYTES];
	memcpy(buf, line, n);
	buf[n] = '\n';
	if (pwrite(B.why_fd, buf, n + 1, (off_t)B.why_len) == (ssize_t)(n + 1))
		B.why_len += n + 1;
}

static __thread struct slot *my_slot __attribute__((tls_model("initial-exec")));

/* Dictionaries: the kind, name and algo ones are fixed; dtype and comm
 * grow. Index widths bound them: dtype is int8. Datatype names repeat
 * (a type freed and made again) and are few: all are kept, to find
 * them again. Communicator names are each new (they count the
 * communicators made before), so they are not searched, and each is
 * freed once written: a program that makes and frees communicators
 * without end holds only those named since the last flush. */
static struct {
	pthread_mutex_t mu;
	char **v[D_COUNT];                 /* v[d][i] is the value of id base[d] + i */
	int32_t base[D_COUNT], n[D_COUNT]; /* n: ids given */
	int32_t cap[D_COUNT], sent[D_COUNT];
	int started; /* the first flush wrote the fixed ones */
} D = {.mu = PTHREAD_MUTEX_INITIALIZER};

static const int32_t dict_max[D_COUNT] = {127, 1 << 20};
static const int dict_col[D_COUNT] = {C_DTYPE, C_COMM};
static const int dict_search[D_COUNT] = {1, 0};

int32_t cp_dict_add(int d, const char *s)
{
	pthread_mutex_lock(&D.mu);
	int32_t id = -1;
	for (int32_t i = 0; dict_search[d] && i < D.n[d] - D.base[d]; i++)
		if (strcmp(D.v[d][i], s) == 0) {
			id = D.base[d] + i;
			break;
		}
	if (id < 0 && D.n[d] >= dict_max[d] - 1) {
		/* Full: the last value is "other", for every name past it. */
		if (D.n[d] == dict_max[d] - 1)
			s = "other";
		else
			id = D.n[d] - 1;
	}
	if (id < 0) {
		int32_t held = D.n[d] - D.base[d];
		if (held == D.cap[d]) {
			int32_t cap = D.cap[d] ? 2 * D.cap[d] : 64;
			char **v = realloc(D.v[d], sizeof(char *) * (size_t)cap);
			if (v == NULL) {
				pthread_mutex_unlock(&D.mu);
				return 0;
			}
			D.v[d] = v;
			D.cap[d] = cap;
		}
		char *c = strdup(s);
		if (c == NULL) {
			pthread_mutex_unlock(&D.mu);
			return 0;
		}
		D.v[d][held] = c;
		id = D.n[d]++;
	}
	pthread_mutex_unlock(&D.mu);
	return id;
}

void cp_dict_value(int d, int32_t id, char *out, size_t n)
{
	pthread_mutex_lock(&D.mu);
	const char *s = id >= D.base[d] && id < D.n[d] ? D.v[d][id - D.base[d]] : "";
	snprintf(out, n, "%s", s);
	pthread_mutex_unlock(&D.mu);
}

int64_t cp_dict_held(int d)
{
	pthread_mutex_lock(&D.mu);
	int64_t n = D.n[d] - D.base[d];
	pthread_mutex_unlock(&D.mu);
	return n;
}

static void slot_end(void *p)
{
	struct slot *s = p;
	pthread_mutex_lock(&B.mu);
	struct chunk *c = atomic_load(&s->cur);
	if (c != NULL) {
		/* Hand its chunk to the flusher, as if full. */
		atomic_store(&s->cur, NULL);
		c->next = NULL;
		if (B.full_tail)
			B.full_tail->next = c;
		else
			B.full = c;
		B.full_tail = c;
		B.nfull++;
	}
	s->idle = 1;
	pthread_mutex_unlock(&B.mu);
}

static struct slot *slot_new(void)
{
	pthread_mutex_lock(&B.mu);
	struct slot *s;
	for (s = B.slots; s != NULL && !s->idle; s = s->next)
		;
	if (s == NULL) {
		s = calloc(1, sizeof *s);
		if (s == NULL) {
			pthread_mutex_unlock(&B.mu);
			return NULL;
		}
		s->next = B.slots;
		B.slots = s;
	}
	s->idle = 0;
	pthread_mutex_unlock(&B.mu);
	my_slot = s;
	pthread_setspecific(B.key, s);
	return s;
}

static void flush_pass(void);

/* next_chunk gives s a fresh chunk for its full one (or its first). */
static struct chunk *next_chunk(struct slot *s, struct chunk *full)
{
	for (int tries = 0; tries < 2; tries++) {
		pthread_mutex_lock(&B.mu);
		if (full != NULL) {
			full->next = NULL;
			if (B.full_tail)
				B.full_tail->next = full;
			else
				B.full = full;
			B.full_tail = full;
			B.nfull++;
			atomic_store(&s->cur, NULL);
			full = NULL;
		}
		struct chunk *c = B.free;
		if (c != NULL)
			B.free = c->next;
		else if (B.spare < MAX_CHUNKS || tries == 1) {
			/* On the second try every chunk is some thread's own. */
			c = malloc(sizeof *c);
			if (c != NULL)
				B.spare++;
		}
		if (c != NULL) {
			atomic_store_explicit(&c->n, 0, memory_order_relaxed);
			c->done = 0;
			c->next = NULL;
			atomic_store_explicit(&s->cur, c, memory_order_release);
		}
		int wake = B.nfull >= MAX_CHUNKS / 2;
		pthread_mutex_unlock(&B.mu);
		if (wake) {
			/* Half the pool waits: write it now rather than at the next
			 * tick. Waking the thread for each chunk would take a core
			 * from the program more often, for less each time. */
			pthread_mutex_lock(&B.wake_mu);
			B.pending = 1;
			pthread_cond_signal(&B.wake);
			pthread_mutex_unlock(&B.wake_mu);
		}
		if (c != NULL)
			return c;
		/* The pool is spent: write the full chunks out here. */
		flush_pass();
	}
	return NULL;
}

void cp_record(const struct cp_event *e)
{
	struct slot *s = my_slot;
	if (__builtin_expect(s == NULL, 0) && (s = slot_new()) == NULL) {
		atomic_fetch_add_explicit(&cp.lost, 1, memory_order_relaxed);
		return;
	}
	struct chunk *c = atomic_load_explicit(&s->cur, memory_order_relaxed);
	size_t n = 0;
	if (__builtin_expect(c == NULL || (n = atomic_load_explicit(&c->n, memory_order_relaxed)) == CHUNK, 0)) {
		if ((c = next_chunk(s, c)) == NULL) {
			atomic_fetch_add_explicit(&cp.lost, 1, memory_order_relaxed);
			return;
		}
		n = 0;
	}
	c->ev[n] = *e;
	atomic_store_explicit(&c->n, n + 1, memory_order_release);
}

static int write_dicts(void)
{
	static const char *const algos[] = {""}; /* and labels */
	if (!D.started) {
		if (cp_ipc_dictionary(cp.fd, cp_ipc_dict_id(C_KIND), cp_kind_names, K_COUNT, 0) ||
		    cp_ipc_dictionary(cp.fd, cp_ipc_dict_id(C_NAME), cp_names, N_COUNT, 0) ||
		    cp_ipc_dictionary(cp.fd, cp_ipc_dict_id(C_ALGO), algos, 1, 0) ||
		    cp_ipc_dictionary(cp.fd, cp_ipc_dict_id(C_LABEL), algos, 1, 0))
			return -1;
	}
	pthread_mutex_lock(&D.mu);
	int rc = 0;
	for (int d = 0; d < D_COUNT && rc == 0; d++) {
		if (D.started && D.n[d] == D.sent[d])
			continue;
		rc = cp_ipc_dictionary(cp.fd, cp_ipc_dict_id(dict_col[d]), (const char *const *)D.v[d] + (D.sent[d] - D.base[d]),
				       (size_t)(D.n[d] - D.sent[d]), D.started);
		D.sent[d] = D.n[d];
		if (!dict_search[d]) {
			/* Written: the stream has them now. */
			for (int32_t i = 0; i < D.n[d] - D.base[d]; i++)
				free(D.v[d][i]);
			D.base[d] = D.n[d];
		}
	}
	pthread_mutex_unlock(&D.mu);
	D.started = 1;
	return rc;
}

static int add_events(const struct chunk *c, size_t from, size_t to, size_t *n)
{
	if (*n + (to - from) > B.evcap) {
		size_t cap = B.evcap ? B.evcap : CHUNK;
		while (cap < *n + (to - from))
			cap *= 2;
		const struct cp_event **e = realloc(B.evs, cap * sizeof *e);
		if (e == NULL)
			return -1;
		B.evs = e;
		B.evcap = cap;
	}
	for (size_t i = from; i < to; i++)
		B.evs[(*n)++] = &c->ev[i];
	return 0;
}

/* flush_pass writes every event recorded so far. */
static void flush_pass(void)
{
	pthread_mutex_lock(&B.write_mu);
	pthread_mutex_lock(&B.mu);
	struct chunk *full = B.full;
	B.full = B.full_tail = NULL;
	B.nfull = 0;
	struct slot *slots = B.slots;
	pthread_mutex_unlock(&B.mu);

	size_t n = 0;
	int err = B.broken;
	for (struct chunk *c = full; c != NULL && !err; c = c->next) {
		size_t m = atomic_load_explicit(&c->n, memory_order_acquire);
		err = add_events(c, c->done, m, &n);
		c->done = m;
	}
	for (struct slot *s = slots; s != NULL && !err; s = s->next) {
		struct chunk *c = atomic_load_explicit(&s->cur, memory_order_acquire);
		if (c == NULL)
			continue;
		size_t m = atomic_load_explicit(&c->n, memory_order_acquire);
		err = add_events(c, c->done, m, &n);
		c->done = m;
	}
	if (!err && n > 0 && cp.fd >= 0) {
		err = write_dicts();
		for (size_t i = 0; i < n && !err; i += MAX_BATCH) {
			size_t k = n - i < MAX_BATCH ? n - i : MAX_BATCH;
			err = cp_ipc_batch(cp.fd, B.evs + i, k, cp.rank);
		}
		if (!err)
			B.written += (int64_t)n;
	}
	if (err && !B.broken) {
		int e = errno;
		B.broken = 1;
		char line[256];
		snprintf(line, sizeof line, "writing its stream: %s", strerror(e));
		why_note(line);
		cp_warn("writing rank %d's trace failed: %s; recording stops here, the program runs on", cp.rank, strerror(e));
	}
	pthread_mutex_lock(&B.mu);
	while (full != NULL) {
		struct chunk *c = full;
		full = c->next;
		c->next = B.free;
		B.free = c;
	}
	pthread_mutex_unlock(&B.mu);
	pthread_mutex_unlock(&B.write_mu);
}

static void *flusher(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&B.wake_mu);
	while (!B.stop) {
		if (!B.pending) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			int64_t t = (int64_t)ts.tv_nsec + cp.flush_ns;
			ts.tv_sec += (time_t)(t / 1000000000);
			ts.tv_nsec = (long)(t % 1000000000);
			pthread_cond_timedwait(&B.wake, &B.wake_mu, &ts);
		}
		B.pending = 0;
		if (B.stop)
			break;
		pthread_mutex_unlock(&B.wake_mu);
		flush_pass();
		pthread_mutex_lock(&B.wake_mu);
	}
	pthread_mutex_unlock(&B.wake_mu);
	return NULL;
}

int cp_buf_start(void)
{
	if (pthread_key_create(&B.key, slot_end))
		return -1;
	B.stop = 0;
	/* The flush thread must not take the program's signals. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&B.thread, NULL, flusher, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		return -1;
	pthread_setname_np(B.thread, "commprof-flush"); /* as top -H and perf show it */
	B.running = 1;
	why_open();
	return 0;
}

void cp_buf_stop(int end_of_stream)
{
	if (B.running) {
		pthread_mutex_lock(&B.wake_mu);
		B.stop = 1;
		pthread_cond_signal(&B.wake);
		pthread_mutex_unlock(&B.wake_mu);
		pthread_join(B.thread, NULL);
		B.running = 0;
	}
	flush_pass();
	pthread_mutex_lock(&B.write_mu);
	if (cp.fd >= 0) {
		int ended = 0;
		if (end_of_stream && !B.broken) {
			if (cp_ipc_end(cp.fd) == 0)
				ended = 1;
			else {
				int e = errno;
				char line[256];
				snprintf(line, sizeof line, "ending its stream: %s", strerror(e));
				why_note(line);
				cp_warn("ending rank %d's trace failed: %s", cp.rank, strerror(e));
			}
		}
		close(cp.fd);
		cp.fd = -1;
		if (B.why_fd >= 0) {
			if (ended) {
				char path[4200];
				why_path(path, sizeof path);
				unlink(path);
			} else if (end_of_stream) {
				why_note("reached MPI_Finalize");
			}
			close(B.why_fd);
			B.why_fd = -1;
		}
	}
	pthread_mutex_unlock(&B.write_mu);
}

int64_t cp_buf_events(void) { return B.written; }

void cp_buf_flush(void) { flush_pass(); }
