/* memhold: one rank holds a known amount of memory for a known time, the
 * truth the memory samples are checked against (interpose/pmpi/sample_test.go).
 *
 *   memhold RANK MIB HOLD_MS
 *
 * Every rank does a barrier and an allreduce, then rank RANK allocates
 * MIB MiB, writes every page of it (so that the pages are resident),
 * holds it for HOLD_MS and frees it, while the others wait in a barrier;
 * then every rank does another allreduce. Rank RANK prints "held N"
 * with the bytes it touched. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int who = argc > 1 ? atoi(argv[1]) : 1;
	long mib = argc > 2 ? atol(argv[2]) : 256;
	double hold = argc > 3 ? atof(argv[3]) : 1000;
	int rank;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	double x = rank, sum = 0;
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	if (rank == who) {
		size_t n = (size_t)mib << 20;
		/* mmap, not malloc: the pages come from the kernel and go back
		 * to it at munmap, whatever the allocator keeps. */
		char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			perror("mmap");
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
		memset(p, 1, n);
		struct timespec ts = {.tv_sec = (time_t)(hold / 1000), .tv_nsec = (long)((hold - 1000.0 * (long)(hold / 1000)) * 1e6)};
		while (nanosleep(&ts, &ts) != 0)
			;
		printf("held %zu\n", n);
		fflush(stdout);
		munmap(p, n);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	MPI_Finalize();
	return 0;
}
