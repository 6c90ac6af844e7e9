/* stall: MPI communication patterns with a known stall, the truth the
 * straggler verdicts are checked against (interpose/pmpi/stall_test.go,
 * bench/verdicts.sh).
 *
 *   stall PATTERN SLOW STALL_MS EVERY ITERS WORK_MS
 *
 * Every rank works WORK_MS (a sleep, so that ranks that outnumber the
 * cores do not slow each other), then communicates in PATTERN; rank SLOW
 * (-1: none) sleeps STALL_MS more before it on one iteration in EVERY. A
 * stall costs the job its STALL_MS each time, as the others wait for the
 * slow rank's messages. Patterns:
 *
 *   coll   MPI_Allreduce on MPI_COMM_WORLD
 *   halo   MPI_Irecv and MPI_Isend to both neighbours, then MPI_Waitall
 *   icoll  MPI_Iallreduce, half the work again, MPI_Wait
 *   sub    MPI_Allreduce on a communicator of the even or the odd ranks,
 *          and every fifth iteration a small one on MPI_COMM_WORLD
 *   wait   MPI_Irecv from the left, MPI_Isend to the right, then
 *          MPI_Waitany and MPI_Testsome until both are done
 *
 * Rank 0 prints the stalls it injected, how long the slow rank was away
 * in them by its own clock (on a busy machine a rank wakes late: that
 * too cost the job), and the loop's time. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void nap(double ms)
{
	struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)((ms - 1000.0 * (long)(ms / 1000)) * 1e6)};
	while (nanosleep(&ts, &ts) != 0)
		;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	const char *pat = argc > 1 ? argv[1] : "halo";
	int slow = argc > 2 ? atoi(argv[2]) : -1;
	double stall = argc > 3 ? atof(argv[3]) : 30;
	int every = argc > 4 ? atoi(argv[4]) : 10;
	int iters = argc > 5 ? atoi(argv[5]) : 60;
	double work = argc > 6 ? atof(argv[6]) : 2;
	if (every < 1)
		every = 1;
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Comm sub;
	MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &sub);
	enum { N = 1024 };
	static double a[N], b[N], l[N], r[N];
	for (int i = 0; i < N; i++)
		a[i] = rank + i;
	int left = (rank + size - 1) % size, right = (rank + 1) % size;
	int stalls = 0;
	double away = 0; /* s, the slow rank's stalls by its clock */
	MPI_Barrier(MPI_COMM_WORLD);
	double t0 = MPI_Wtime();
	for (int it = 0; it < iters; it++) {
		nap(work);
		if (it % every == every / 2) {
			stalls++;
			if (rank == slow) {
				double s0 = MPI_Wtime();
				nap(stall);
				away += MPI_Wtime() - s0;
			}
		}
		if (!strcmp(pat, "halo")) {
			MPI_Request q[4];
			MPI_Irecv(l, N, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &q[0]);
			MPI_Irecv(r, N, MPI_DOUBLE, right, 2, MPI_COMM_WORLD, &q[1]);
			MPI_Isend(a, N, MPI_DOUBLE, left, 2, MPI_COMM_WORLD, &q[2]);
			MPI_Isend(a, N, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &q[3]);
			MPI_Waitall(4, q, MPI_STATUSES_IGNORE);
		} else if (!strcmp(pat, "coll")) {
			MPI_Allreduce(a, b, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		} else if (!strcmp(pat, "icoll")) {
			MPI_Request q;
			MPI_Iallreduce(a, b, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q);
			nap(work / 2);
			MPI_Wait(&q, MPI_STATUS_IGNORE);
		} else if (!strcmp(pat, "sub")) {
			MPI_Allreduce(a, b, N, MPI_DOUBLE, MPI_SUM, sub);
			if (it % 5 == 4)
				MPI_Allreduce(a, b, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		} else if (!strcmp(pat, "wait")) {
			MPI_Request q[2];
			int idx, outc, ind[2];
			MPI_Status st[2];
			MPI_Irecv(l, N, MPI_DOUBLE, left, 3, MPI_COMM_WORLD, &q[0]);
			MPI_Isend(a, N, MPI_DOUBLE, right, 3, MPI_COMM_WORLD, &q[1]);
			MPI_Waitany(2, q, &idx, &st[0]);
			do
				MPI_Testsome(2, q, &outc, ind, st);
			while (outc != MPI_UNDEFINED);
		} else {
			if (rank == 0)
				fprintf(stderr, "stall: unknown pattern %s\n", pat);
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
	}
	double t1 = MPI_Wtime();
	/* Unrecorded: the program's own report, not part of its pattern. */
	MPI_Pcontrol(0);
	double all = 0;
	MPI_Reduce(&away, &all, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("pattern %s: rank %d stalled %d times for %.1f ms (%.1f ms away by its clock); loop %.1f ms\n", pat, slow,
		       slow >= 0 ? stalls : 0, stall, 1e3 * all, 1e3 * (t1 - t0));
	MPI_Comm_free(&sub);
	MPI_Finalize();
	return 0;
}
