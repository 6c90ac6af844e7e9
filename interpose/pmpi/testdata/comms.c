/* A program that makes and frees communicators without end
 * (TestCommunicatorMemory): each of ITERATIONS rounds duplicates the
 * last duplicate (names made of names), splits the world, frees a
 * communicator while a receive on it is still outstanding, and makes and
 * frees a datatype. Rank 0 prints what the PMPI library holds for the
 * program's communicators and datatypes (commprof_pmpi_debug_memory)
 * after a tenth of the rounds and after the last:
 *
 *	memory ROUNDS COMMS BYTES SLOTS NAMES
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	int rounds = argc > 1 ? atoi(argv[1]) : 10000;
	int (*memory)(long long[4]) = (int (*)(long long[4]))dlsym(RTLD_DEFAULT, "commprof_pmpi_debug_memory");
	if (memory == NULL) {
		fprintf(stderr, "comms: the commprof PMPI library is not loaded\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	MPI_Comm cur;
	MPI_Comm_dup(MPI_COMM_WORLD, &cur);
	for (int i = 1; i <= rounds; i++) {
		MPI_Comm next, half;
		MPI_Comm_dup(cur, &next);
		MPI_Comm_split(MPI_COMM_WORLD, 0, -rank, &half);
		MPI_Comm_free(&half);

		/* A receive outstanding on cur when cur is freed. */
		int in = -1, out = i;
		MPI_Request r;
		MPI_Irecv(&in, 1, MPI_INT, rank, 0, cur, &r);
		MPI_Send(&out, 1, MPI_INT, rank, 0, cur);
		MPI_Comm_free(&cur);
		MPI_Wait(&r, MPI_STATUS_IGNORE);
		if (in != i) {
			fprintf(stderr, "comms: round %d received %d\n", i, in);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
		cur = next;

		MPI_Datatype pair;
		MPI_Type_contiguous(2, MPI_INT, &pair);
		MPI_Type_commit(&pair);
		int two[2] = {i, i};
		MPI_Bcast(two, 1, pair, 0, cur);
		MPI_Type_free(&pair);

		if (i == rounds / 10 || i == rounds) {
			long long m[4];
			if (memory(m) != 0) {
				fprintf(stderr, "comms: the library does not record\n");
				MPI_Abort(MPI_COMM_WORLD, 1);
			}
			if (rank == 0)
				printf("memory %d %lld %lld %lld %lld\n", i, m[0], m[1], m[2], m[3]);
		}
	}
	MPI_Comm_free(&cur);
	MPI_Finalize();
	return 0;
}
