/* An MPI program that ends without MPI_Finalize, after the number of
 * allreduces its argument says (TestWithoutFinalize). */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int n = argc > 1 ? atoi(argv[1]) : 10;
	double a = 1, b;
	for (int i = 0; i < n; i++)
		MPI_Allreduce(&a, &b, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	exit(0);
}
