/* Measures what the PMPI library costs (docs/benchmarks.md, "PMPI
 * interposition"); interpose/pmpi/bench/run.sh runs it.
 *
 *   pmpi_bench percall [CALLS] [ROUNDS]   on 1 rank, under the library
 *   pmpi_bench allreduce [ITERS]          on 2 ranks, with or without it
 *   pmpi_bench toggle [ITERS] [BLOCKS]    on 2 ranks, under the library
 *
 * percall times 8-byte MPI_Allreduce calls on a 1-rank MPI_COMM_WORLD
 * (the MPI library copies 8 bytes) in rounds that alternate between
 * recording and paused (MPI_Pcontrol(0): the call still goes through the
 * library's function, which only checks a flag), and times
 * clock_gettime(CLOCK_MONOTONIC), which the library calls twice per
 * call. It prints the median of each in ns per call, in elapsed time and
 * in the calling thread's CPU time (which a busy machine does not
 * inflate: time the thread waited for a core is not in it).
 *
 * allreduce prints rank 0's 8-byte MPI_Allreduce latency in us: ITERS
 * calls after 1000 warm-up calls, in 20 blocks, the median of the blocks'
 * means (a machine shared with other work preempts some blocks).
 *
 * toggle alternates blocks of ITERS 8-byte MPI_Allreduce calls recording
 * and paused (MPI_Pcontrol, on every rank alike), BLOCKS of each, and
 * prints rank 0's median latency of each and the median ratio of each
 * recording block to the paused block before it: the two see the same
 * machine, however busy it is. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof *v, cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double cpu(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* calls times n calls: elapsed ns per call, and CPU ns per call in *c. */
static double calls(int n, double *c)
{
	double a = 1, b;
	double t0 = now(), c0 = cpu();
	for (int i = 0; i < n; i++)
		MPI_Allreduce(&a, &b, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	*c = (cpu() - c0) / n;
	return (now() - t0) / n;
}

static double clocks(int n)
{
	struct timespec ts;
	double t0 = now();
	for (int i = 0; i < n; i++)
		clock_gettime(CLOCK_MONOTONIC, &ts);
	return (now() - t0) / n;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	const char *mode = argc > 1 ? argv[1] : "percall";
	if (strcmp(mode, "percall") == 0) {
		int n = argc > 2 ? atoi(argv[2]) : 100000, rounds = argc > 3 ? atoi(argv[3]) : 20;
		double *v = calloc(5 * (size_t)rounds, sizeof *v);
		double *on = v, *off = v + rounds, *ck = v + 2 * rounds, *con = v + 3 * rounds, *coff = v + 4 * rounds;
		double c;
		calls(n, &c); /* warm up */
		for (int r = 0; r < rounds; r++) {
			MPI_Pcontrol(0);
			off[r] = calls(n, &coff[r]);
			MPI_Pcontrol(1);
			on[r] = calls(n, &con[r]);
			ck[r] = clocks(n);
		}
		double mon = median(on, rounds), moff = median(off, rounds), mck = median(ck, rounds);
		double mcon = median(con, rounds), mcoff = median(coff, rounds);
		printf("percall, %d rounds of %d calls: recording %.1f ns (CPU %.1f), paused %.1f ns (CPU %.1f), "
		       "clock_gettime %.1f ns; recording costs %.1f ns (CPU %.1f), %.1f (CPU %.1f) beyond its two clock reads\n",
		       rounds, n, mon, mcon, moff, mcoff, mck, mon - moff, mcon - mcoff, mon - moff - 2 * mck,
		       mcon - mcoff - 2 * mck);
	} else if (strcmp(mode, "toggle") == 0) {
		int iters = argc > 2 ? atoi(argv[2]) : 10000, blocks = argc > 3 ? atoi(argv[3]) : 40;
		double *v = calloc(3 * (size_t)blocks, sizeof *v), *on = v, *off = v + blocks, *ratio = v + 2 * blocks;
		double a = 1, b;
		for (int i = 0; i < 1000; i++)
			MPI_Allreduce(&a, &b, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		for (int k = 0; k < blocks; k++) {
			for (int rec = 0; rec < 2; rec++) {
				MPI_Pcontrol(rec);
				MPI_Barrier(MPI_COMM_WORLD);
				double t0 = now();
				for (int i = 0; i < iters; i++)
					MPI_Allreduce(&a, &b, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
				(rec ? on : off)[k] = (now() - t0) / iters / 1e3;
			}
			ratio[k] = on[k] / off[k];
		}
		if (rank == 0)
			printf("toggle, %d blocks of %d calls each way: recording %.3f us, paused %.3f us, median ratio %.3f\n",
			       blocks, iters, median(on, blocks), median(off, blocks), median(ratio, blocks));
	} else {
		int iters = argc > 2 ? atoi(argv[2]) : 20000;
		double a = 1, b;
		for (int i = 0; i < 1000; i++)
			MPI_Allreduce(&a, &b, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		enum { BLOCKS = 20 };
		double block[BLOCKS];
		int per = iters / BLOCKS > 0 ? iters / BLOCKS : 1;
		MPI_Barrier(MPI_COMM_WORLD);
		for (int k = 0; k < BLOCKS; k++) {
			double t0 = now();
			for (int i = 0; i < per; i++)
				MPI_Allreduce(&a, &b, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
			block[k] = (now() - t0) / per / 1e3;
		}
		if (rank == 0)
			printf("allreduce: %.3f us\n", median(block, BLOCKS));
	}
	MPI_Finalize();
	return 0;
}
