/* The sampling thread: the process's resident memory, its peak, its user
 * and system CPU time, its main thread's wait for a core, and on the
 * first rank of each host the host's RAPL energy counters and its GPUs'
 * (NVML), recorded as sample events (kind "sample", name the counter,
 * value the reading) once when recording starts, every COMMPROF_SAMPLE
 * (default 100ms; "off" or 0 for none; a rate such as 10hz) and once
 * when it stops. commprof's own ranks sample the same counters under the
 * same names (interpose/sample.go); docs/metrics.md defines them.
 *
 * The thread records through cp_record into a chunk of its own, like any
 * recording thread, and takes no lock the program's threads hold across
 * an MPI call; it sleeps on its own condition variable, so stopping it is
 * immediate, and it blocks every signal, so the program's go to the
 * program's threads.
 */
#define _GNU_SOURCE
#include "cp.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define MAX_DOMAINS 16
#define MAX_GPUS (N_SAMPLE_ENERGY_GPU_LAST - N_SAMPLE_ENERGY_GPU0 + 1)

/* NVML, opened with dlopen where the driver installed it: each GPU's
 * energy since the driver loaded, in mJ (nvmlDeviceGetTotalEnergyConsumption,
 * Volta and later). */
struct nvml {
	void *lib;
	int (*shutdown)(void);
	int (*energy)(void *dev, unsigned long long *mj);
	void *dev[MAX_GPUS];
	unsigned long long first[MAX_GPUS];
	unsigned n;
};

struct domain {
	int name;          /* N_SAMPLE_ENERGY_PKG or N_SAMPLE_ENERGY_DRAM */
	char path[512];    /* its energy_uj */
	uint64_t max;      /* max_energy_range_uj: the counter wraps from max to 0 */
	uint64_t last, total;
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t wake;
	pthread_t thread;
	int running, stop;
	int64_t every; /* ns */
	int statm;     /* /proc/self/statm, kept open */
	int sched;     /* /proc/self/schedstat (the main thread's), kept open */
	long page;
	struct domain dom[MAX_DOMAINS];
	int ndom;
	int energy;      /* this rank reads the host's counters */
	struct nvml gpu; /* opened by the sampling thread */
} S = {.mu = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER, .statm = -1, .sched = -1};

static int read_u64(const char *path, uint64_t *v)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	char buf[64];
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	char *end;
	*v = strtoull(buf, &end, 10);
	return end == buf ? -1 : 0;
}

/* open_energy finds the RAPL package and DRAM domains under root, as
 * interpose/rapl.go does. */
static void open_energy(const char *root)
{
	DIR *d = opendir(root);
	if (d == NULL)
		return;
	struct dirent *e;
	while ((e = readdir(d)) != NULL && S.ndom < MAX_DOMAINS) {
		if (strncmp(e->d_name, "intel-rapl:", 11) != 0)
			continue;
		char p[512], name[64] = {0};
		snprintf(p, sizeof p, "%s/%s/name", root, e->d_name);
		FILE *f = fopen(p, "r");
		if (f == NULL)
			continue;
		if (fgets(name, sizeof name, f) == NULL)
			name[0] = 0;
		fclose(f);
		name[strcspn(name, "\n")] = 0;
		struct domain *m = &S.dom[S.ndom];
		if (strncmp(name, "package", 7) == 0)
			m->name = N_SAMPLE_ENERGY_PKG;
		else if (strcmp(name, "dram") == 0)
			m->name = N_SAMPLE_ENERGY_DRAM;
		else
			continue;
		snprintf(p, sizeof p, "%s/%s/max_energy_range_uj", root, e->d_name);
		if (read_u64(p, &m->max))
			m->max = 0;
		snprintf(m->path, sizeof m->path, "%s/%s/energy_uj", root, e->d_name);
		if (read_u64(m->path, &m->last))
			continue; /* not readable (root only since 2020): left out */
		m->total = 0;
		S.ndom++;
	}
	closedir(d);
}

/* open_nvml finds the host's GPUs through NVML, if the library is there;
 * the sampling thread calls it, so that NVML's start-up (which can take
 * a while) never holds up MPI_Init. */
static void open_nvml(void)
{
	void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL)
		return;
	int (*init)(void) = (int (*)(void))dlsym(lib, "nvmlInit_v2");
	int (*count)(unsigned *) = (int (*)(unsigned *))dlsym(lib, "nvmlDeviceGetCount_v2");
	int (*handle)(unsigned, void **) = (int (*)(unsigned, void **))dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
	S.gpu.energy = (int (*)(void *, unsigned long long *))dlsym(lib, "nvmlDeviceGetTotalEnergyConsumption");
	S.gpu.shutdown = (int (*)(void))dlsym(lib, "nvmlShutdown");
	unsigned n = 0;
	if (init == NULL || count == NULL || handle == NULL || S.gpu.energy == NULL || S.gpu.shutdown == NULL || init() != 0) {
		dlclose(lib);
		return;
	}
	if (count(&n) != 0)
		n = 0;
	for (unsigned i = 0; i < n && S.gpu.n < MAX_GPUS; i++) {
		void *d = NULL;
		unsigned long long mj = 0;
		/* A GPU that cannot say its energy (before Volta) is left out. */
		if (handle(i, &d) == 0 && S.gpu.energy(d, &mj) == 0) {
			S.gpu.dev[S.gpu.n] = d;
			S.gpu.first[S.gpu.n] = mj;
			S.gpu.n++;
		}
	}
	if (S.gpu.n == 0) {
		S.gpu.shutdown();
		dlclose(lib);
		return;
	}
	S.gpu.lib = lib;
}

static void record(int name, int64_t at, double v)
{
	struct cp_event e = {.start = at, .seq = -1, .value = v, .peer = -1, .root = -1, .name = name, .kind = K_SAMPLE};
	cp_record(&e);
}

static void sample(void)
{
	int64_t now = cp_now();
	char buf[128];
	ssize_t n = S.statm >= 0 ? pread(S.statm, buf, sizeof buf - 1, 0) : -1;
	if (n > 0) {
		buf[n] = 0;
		long long size = 0, resident = 0;
		if (sscanf(buf, "%lld %lld", &size, &resident) == 2)
			record(N_SAMPLE_RSS, now, (double)resident * (double)S.page);
	}
	/* The main thread's time runnable but not running (its second field):
	 * how long the host kept the rank's work off a core. */
	n = S.sched >= 0 ? pread(S.sched, buf, sizeof buf - 1, 0) : -1;
	if (n > 0) {
		buf[n] = 0;
		unsigned long long run = 0, wait = 0;
		if (sscanf(buf, "%llu %llu", &run, &wait) == 2)
			record(N_SAMPLE_SCHED_WAIT, now, (double)wait);
	}
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) == 0) {
		record(N_SAMPLE_PEAK_RSS, now, (double)ru.ru_maxrss * 1024);
		record(N_SAMPLE_CPU_USER, now, (double)ru.ru_utime.tv_sec * 1e9 + (double)ru.ru_utime.tv_usec * 1e3);
		record(N_SAMPLE_CPU_SYSTEM, now, (double)ru.ru_stime.tv_sec * 1e9 + (double)ru.ru_stime.tv_usec * 1e3);
	}
	uint64_t pkg = 0, dram = 0;
	int have_pkg = 0, have_dram = 0;
	for (int i = 0; i < S.ndom; i++) {
		struct domain *m = &S.dom[i];
		uint64_t v;
		if (read_u64(m->path, &v) == 0) {
			if (v >= m->last)
				m->total += v - m->last;
			else if (m->max > 0 && m->last <= m->max)
				m->total += m->max - m->last + v; /* wrapped around */
			m->last = v;
		}
		if (m->name == N_SAMPLE_ENERGY_PKG)
			pkg += m->total, have_pkg = 1;
		else
			dram += m->total, have_dram = 1;
	}
	if (have_pkg)
		record(N_SAMPLE_ENERGY_PKG, now, (double)pkg);
	if (have_dram)
		record(N_SAMPLE_ENERGY_DRAM, now, (double)dram);
	for (unsigned i = 0; i < S.gpu.n; i++) {
		unsigned long long mj;
		if (S.gpu.energy(S.gpu.dev[i], &mj) == 0 && mj >= S.gpu.first[i])
			record(N_SAMPLE_ENERGY_GPU0 + (int)i, now, (double)(mj - S.gpu.first[i]) * 1000);
	}
}

static void *sampler(void *arg)
{
	(void)arg;
	/* A fixed schedule on the monotonic clock: a late wake-up does not
	 * delay the readings after it. */
	if (S.energy)
		open_nvml();
	int64_t next = cp_clock();
	pthread_mutex_lock(&S.mu);
	while (!S.stop) {
		next += S.every;
		int64_t now = cp_clock();
		if (next <= now)
			next = now + S.every; /* far behind (a stopped process): start again from now */
		struct timespec ts = {.tv_sec = (time_t)(next / 1000000000), .tv_nsec = (long)(next % 1000000000)};
		while (!S.stop && pthread_cond_timedwait(&S.wake, &S.mu, &ts) == 0)
			;
		if (S.stop)
			break;
		pthread_mutex_unlock(&S.mu);
		sample();
		pthread_mutex_lock(&S.mu);
	}
	pthread_mutex_unlock(&S.mu);
	return NULL;
}

/* parse_every reads COMMPROF_SAMPLE: 0 for off. */
static int64_t parse_every(void)
{
	const char *v = getenv("COMMPROF_SAMPLE");
	if (v == NULL || *v == 0)
		return 100000000;
	if (strcmp(v, "off") == 0 || strcmp(v, "0") == 0)
		return 0;
	size_t n = strlen(v);
	if (n > 2 && strcasecmp(v + n - 2, "hz") == 0) {
		char *end;
		double hz = strtod(v, &end);
		if (end == v + n - 2 && hz > 0 && hz <= 1000)
			return (int64_t)(1e9 / hz);
	} else {
		int64_t ns = cp_parse_duration(v);
		if (ns >= 1000000)
			return ns;
	}
	cp_warn("COMMPROF_SAMPLE=%s: want a period of 1ms or more such as 100ms, a rate such as 10hz, or off; sampling every 100ms", v);
	return 100000000;
}

void cp_sample_start(int energy)
{
	S.every = parse_every();
	if (S.every == 0)
		return;
	S.page = sysconf(_SC_PAGESIZE);
	S.statm = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	S.sched = open("/proc/self/schedstat", O_RDONLY | O_CLOEXEC);
	S.energy = energy;
	if (energy) {
		const char *root = getenv("COMMPROF_POWERCAP");
		open_energy(root && *root ? root : "/sys/class/powercap");
	}
	sample();
	S.stop = 0;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&S.wake, &ca);
	pthread_condattr_destroy(&ca);
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&S.thread, NULL, sampler, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		cp_warn("rank %d: cannot start the sampling thread; memory and CPU are sampled only at the start and end",
			cp.rank);
		S.running = 2; /* no thread, but a last sample to take */
		return;
	}
	pthread_setname_np(S.thread, "commprof-sample");
	S.running = 1;
}

void cp_sample_stop(void)
{
	if (!S.running)
		return;
	if (S.running == 1) {
		pthread_mutex_lock(&S.mu);
		S.stop = 1;
		pthread_cond_signal(&S.wake);
		pthread_mutex_unlock(&S.mu);
		pthread_join(S.thread, NULL);
	}
	S.running = 0;
	sample();
	if (S.gpu.lib != NULL) {
		S.gpu.shutdown();
		dlclose(S.gpu.lib);
		S.gpu.lib = NULL;
		S.gpu.n = 0;
	}
	if (S.statm >= 0) {
		close(S.statm);
		S.statm = -1;
	}
	if (S.sched >= 0) {
		close(S.sched);
		S.sched = -1;
	}
}
