/* hang.py in C, for the doctor's tests (interpose/pmpi/doctor_test.go).
 *
 *     hang FAULT RANK AT [ITERS]
 *
 * Every rank calls MPI_Allreduce of 1024 doubles ITERS times (default
 * 10) on MPI_COMM_WORLD, nothing else collective on it. At the AT-th call
 * (1-based: seq AT-1 in the trace) rank RANK, per FAULT: hang (stops for
 * good before it), bcast (calls MPI_Bcast from rank 0 instead), size
 * (MPI_Allreduce of 512 doubles), op (MPI_MAX instead of MPI_SUM), exit
 * (exits with status 3 without MPI_Finalize), none. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	if (argc < 4) {
		fprintf(stderr, "usage: hang FAULT RANK AT [ITERS]\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	const char *fault = argv[1];
	int bad = atoi(argv[2]), at = atoi(argv[3]), iters = argc > 4 ? atoi(argv[4]) : 10;
	int rank;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	static double a[1024], b[1024];
	for (int i = 0; i < 1024; i++)
		a[i] = rank;
	for (int i = 1; i <= iters; i++) {
		usleep(10000);
		if (rank == bad && i == at) {
			if (strcmp(fault, "hang") == 0) {
				for (;;)
					sleep(3600);
			} else if (strcmp(fault, "bcast") == 0) {
				MPI_Bcast(a, 1024, MPI_DOUBLE, 0, MPI_COMM_WORLD);
				continue;
			} else if (strcmp(fault, "size") == 0) {
				MPI_Allreduce(a, b, 512, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
				continue;
			} else if (strcmp(fault, "op") == 0) {
				MPI_Allreduce(a, b, 1024, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
				continue;
			} else if (strcmp(fault, "exit") == 0) {
				_exit(3);
			}
		}
		MPI_Allreduce(a, b, 1024, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	}
	printf("rank %d done\n", rank);
	MPI_Finalize();
	return 0;
}
