/* Injected faults (docs/inject.md): the hang, mismatch and kill faults of
 * COMMPROF_INJECT that name this rank. Each acts at the rank's K-th
 * collective call, counted over all communicators as the trace numbers
 * them (communicator-making calls included). Other faults are for
 * commprof's own ranks; record refuses them for an MPI program.
 */
#include "cp.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct {
	int64_t hang, kill, mismatch; /* the call number (1-based), 0: none */
	char call[16];                /* the mismatch's: broadcast, barrier, allreduce, half */
	int64_t calls;                /* collective calls so far */
	int kill_now;                 /* the call under way is the one to die in */
} I;

/* key returns the value of key in a fault's "k=v,k=v" text, or -1. */
static long long key(const char *kv, const char *k, char *str, size_t n)
{
	size_t kl = strlen(k);
	for (const char *p = kv; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
		while (*p == ' ')
			p++;
		if (strncmp(p, k, kl) == 0 && p[kl] == '=') {
			const char *v = p + kl + 1;
			if (str) {
				size_t i = 0;
				while (v[i] && v[i] != ',' && v[i] != ';' && i + 1 < n) {
					str[i] = v[i];
					i++;
				}
				str[i] = 0;
			}
			return strtoll(v, NULL, 10);
		}
	}
	return -1;
}

void cp_inject_init(void)
{
	const char *env = getenv("COMMPROF_INJECT");
	if (env == NULL || *env == 0)
		return;
	char *all = strdup(env);
	if (all == NULL)
		return;
	char *save = NULL;
	for (char *f = strtok_r(all, ";", &save); f; f = strtok_r(NULL, ";", &save)) {
		while (*f == ' ')
			f++;
		char *colon = strchr(f, ':');
		if (colon == NULL)
			continue;
		*colon = 0;
		const char *kv = colon + 1;
		char *end = strchr(colon + 1, ';');
		if (end)
			*end = 0;
		if (key(kv, "rank", NULL, 0) != cp.rank)
			continue;
		long long at = key(kv, "at", NULL, 0);
		if (at < 1)
			continue;
		if (strcmp(f, "hang") == 0) {
			I.hang = at;
		} else if (strcmp(f, "kill") == 0) {
			I.kill = at;
		} else if (strcmp(f, "mismatch") == 0) {
			I.mismatch = at;
			if (key(kv, "call", I.call, sizeof I.call) < 0 || I.call[0] == 0)
				snprintf(I.call, sizeof I.call, "broadcast");
		}
	}
	free(all);
	if (I.hang || I.kill || I.mismatch)
		cp_warn("rank %d: injecting on purpose: %s", cp.rank, env);
}

int cp_inject_call(void)
{
	if (!I.hang && !I.kill && !I.mismatch)
		return 0;
	int64_t n = ++I.calls;
	if (n == I.hang) {
		cp_buf_flush();
		for (;;)
			pause(); /* for good: only the end of the job ends it */
	}
	if (n == I.kill)
		I.kill_now = 1;
	return n == I.mismatch;
}

void cp_inject_entered(void)
{
	if (I.kill_now) {
		cp_buf_flush();
		raise(SIGKILL);
	}
}

void cp_inject_plan(int name, int64_t bytes, int *made, int64_t *made_bytes)
{
	int half = strcmp(I.call, "half") == 0;
	*made_bytes = half ? bytes / 2 : bytes;
	if (strcmp(I.call, "barrier") == 0)
		*made = N_BARRIER, *made_bytes = 0;
	else if (strcmp(I.call, "allreduce") == 0 || (half && name != N_BROADCAST))
		*made = N_ALLREDUCE;
	else
		*made = N_BROADCAST;
}

int cp_inject_mismatch(int made, int64_t bytes, int root, MPI_Comm comm)
{
	char *buf = calloc(bytes > 0 ? (size_t)bytes : 1, 1);
	if (buf == NULL)
		return MPI_ERR_NO_MEM;
	int rc;
	if (made == N_BARRIER)
		rc = PMPI_Barrier(comm);
	else if (made == N_ALLREDUCE)
		rc = PMPI_Allreduce(MPI_IN_PLACE, buf, (int)bytes, MPI_BYTE, MPI_BOR, comm);
	else
		rc = PMPI_Bcast(buf, (int)bytes, MPI_BYTE, root >= 0 ? root : 0, comm);
	free(buf);
	return rc;
}
