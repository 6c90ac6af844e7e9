/* A C program whose MPI calls interpose/pmpi's tests know (pmpi_test.go,
 * TestCProgram): on 4 ranks, every send mode, every completion call,
 * communicators made five ways, a derived and a named datatype, threads
 * calling MPI at once, and MPI_Pcontrol. Change both together. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 4
#define ROUNDS 50

static int rank, size, left, right;
static MPI_Comm tcomm[THREADS];

static void *thread(void *arg)
{
	int k = (int)(long)arg;
	double s[4] = {0}, r[4];
	for (int i = 0; i < ROUNDS; i++)
		MPI_Sendrecv(s, 4, MPI_DOUBLE, right, k, r, 4, MPI_DOUBLE, left, k, tcomm[k], MPI_STATUS_IGNORE);
	return NULL;
}

int main(int argc, char **argv)
{
	int provided;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
	if (provided != MPI_THREAD_MULTIPLE) {
		fprintf(stderr, "calls: no MPI_THREAD_MULTIPLE\n");
		return 1;
	}
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size != 4) {
		fprintf(stderr, "calls: run on 4 ranks\n");
		return 1;
	}
	left = (rank + size - 1) % size;
	right = (rank + 1) % size;
	static double a[4096], b[4096];

	/* Not recorded: paused. */
	MPI_Pcontrol(0);
	for (int i = 0; i < 5; i++)
		MPI_Allreduce(a, b, 16, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	MPI_Pcontrol(1);

	/* World collectives 0-2: allreduce, 1 KiB of doubles. */
	for (int i = 0; i < 3; i++)
		MPI_Allreduce(a, b, 128, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);

	/* A struct of an int and two doubles (20 bytes), and the same named. */
	int lens[2] = {1, 2};
	MPI_Aint displs[2] = {0, 8};
	MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE}, particle, named;
	MPI_Type_create_struct(2, lens, displs, types, &particle);
	MPI_Type_commit(&particle);
	MPI_Type_dup(particle, &named);
	MPI_Type_set_name(named, "particle");
	MPI_Bcast(a, 3, particle, 3, MPI_COMM_WORLD); /* 3: 60 bytes, derived:struct, root 3 */
	MPI_Bcast(a, 2, named, 0, MPI_COMM_WORLD);    /* 4: 40 bytes, particle, root 0 */
	MPI_Type_free(&particle);
	MPI_Type_free(&named);

	/* Every blocking send mode around the ring: even ranks send first. */
	static char bsend[1 << 16];
	MPI_Buffer_attach(bsend, sizeof bsend);
	MPI_Request rs;
	MPI_Irecv(b, 8, MPI_DOUBLE, left, 4, MPI_COMM_WORLD, &rs); /* for the ready send */
	MPI_Barrier(MPI_COMM_WORLD);                               /* 5 */
	for (int phase = 0; phase < 2; phase++) {
		if (phase == rank % 2) {
			MPI_Send(a, 8, MPI_DOUBLE, right, 1, MPI_COMM_WORLD);
			MPI_Ssend(a, 16, MPI_DOUBLE, right, 2, MPI_COMM_WORLD);
			MPI_Bsend(a, 32, MPI_DOUBLE, right, 3, MPI_COMM_WORLD);
			MPI_Rsend(a, 8, MPI_DOUBLE, right, 4, MPI_COMM_WORLD);
		} else {
			MPI_Status st;
			MPI_Recv(b, 8, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			MPI_Recv(b, 64, MPI_DOUBLE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st); /* 16 arrive */
			MPI_Recv(b, 32, MPI_DOUBLE, left, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		}
	}
	int idx;
	MPI_Waitany(1, &rs, &idx, MPI_STATUS_IGNORE);

	/* Non-blocking sends and receives, completed by the other calls. */
	MPI_Request q[6];
	for (int i = 0; i < 3; i++) {
		MPI_Irecv(b + 8 * i, 8, MPI_DOUBLE, left, 10 + i, MPI_COMM_WORLD, &q[i]);
		MPI_Isend(a, 8, MPI_DOUBLE, right, 10 + i, MPI_COMM_WORLD, &q[3 + i]);
	}
	for (int done = 0; done < 6;) {
		int out, ids[6];
		MPI_Waitsome(6, q, &out, ids, MPI_STATUSES_IGNORE);
		done += out;
	}
	MPI_Request p[2];
	MPI_Irecv(b, 4, MPI_DOUBLE, left, 20, MPI_COMM_WORLD, &p[0]);
	MPI_Issend(a, 4, MPI_DOUBLE, right, 20, MPI_COMM_WORLD, &p[1]);
	for (int flag = 0; !flag;)
		MPI_Testall(2, p, &flag, MPI_STATUSES_IGNORE);
	MPI_Irecv(b, 2, MPI_DOUBLE, left, 21, MPI_COMM_WORLD, &p[0]);
	MPI_Ibsend(a, 2, MPI_DOUBLE, right, 21, MPI_COMM_WORLD, &p[1]);
	for (int got = 0; got < 2;) {
		int flag, i;
		MPI_Testany(2, p, &i, &flag, MPI_STATUS_IGNORE);
		got += flag && i != MPI_UNDEFINED;
	}
	MPI_Irecv(b, 3, MPI_DOUBLE, left, 22, MPI_COMM_WORLD, &p[0]);
	MPI_Barrier(MPI_COMM_WORLD); /* 6 */
	MPI_Irsend(a, 3, MPI_DOUBLE, right, 22, MPI_COMM_WORLD, &p[1]);
	for (int got = 0; got < 2;) {
		int out, ids[2];
		MPI_Testsome(2, p, &out, ids, MPI_STATUSES_IGNORE);
		got += out;
	}
	MPI_Sendrecv_replace(a, 5, MPI_DOUBLE, right, 30, left, 30, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	MPI_Isend(a, 6, MPI_DOUBLE, right, 40, MPI_COMM_WORLD, &p[0]);
	MPI_Request_free(&p[0]);
	MPI_Recv(b, 6, MPI_DOUBLE, left, 40, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	void *detached;
	int dsize;
	MPI_Buffer_detach(&detached, &dsize);

	/* Communicators. */
	MPI_Comm node, evens, cart, row;
	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node); /* 7: world/split_type0:0 */
	MPI_Allreduce(a, b, 4, MPI_DOUBLE, MPI_SUM, node);
	MPI_Group wg, eg;
	MPI_Comm_group(MPI_COMM_WORLD, &wg);
	int even[2] = {0, 2};
	MPI_Group_incl(wg, 2, even, &eg);
	MPI_Comm_create(MPI_COMM_WORLD, eg, &evens); /* 8: world/create1:0, on even ranks */
	if (evens != MPI_COMM_NULL) {
		MPI_Barrier(evens);
		MPI_Comm_free(&evens);
	}
	MPI_Group_free(&eg);
	MPI_Group_free(&wg);
	int dims[2] = {2, 2}, periods[2] = {0, 0}, keep[2] = {0, 1};
	MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart); /* 9: world/cart2 */
	MPI_Cart_sub(cart, keep, &row);                               /* world/cart2/cart_sub0:{0,2} */
	MPI_Allreduce(a, b, 2, MPI_DOUBLE, MPI_SUM, row);
	MPI_Comm_free(&row);
	MPI_Comm_free(&cart);
	MPI_Comm_free(&node);

	/* Threads, each on a communicator of its own (10-13: world/dup3-6). */
	for (int k = 0; k < THREADS; k++)
		MPI_Comm_dup(MPI_COMM_WORLD, &tcomm[k]);
	pthread_t th[THREADS];
	for (int k = 0; k < THREADS; k++)
		pthread_create(&th[k], NULL, thread, (void *)(long)k);
	for (int k = 0; k < THREADS; k++)
		pthread_join(th[k], NULL);
	for (int k = 0; k < THREADS; k++)
		MPI_Comm_free(&tcomm[k]);

	/* 14: alltoallw, 4 ints to even ranks and 2 doubles to odd ones. */
	int sc[4], rc[4], sd[4], rd[4];
	MPI_Datatype st[4], rt[4];
	for (int k = 0; k < 4; k++) {
		sc[k] = k % 2 ? 2 : 4;
		st[k] = k % 2 ? MPI_DOUBLE : MPI_INT;
		rc[k] = rank % 2 ? 2 : 4;
		rt[k] = rank % 2 ? MPI_DOUBLE : MPI_INT;
		sd[k] = rd[k] = 16 * k;
	}
	MPI_Alltoallw(a, sc, sd, st, b, rc, rd, rt, MPI_COMM_WORLD);

	/* 15: a broadcast its other ranks poll with MPI_Test from before its
	 * root starts it: the root starts it once each has tested it once
	 * and said so (tag 50). Their wait begins at that first test. */
	int token = rank, got;
	MPI_Request bq;
	if (rank == 0) {
		for (int k = 1; k < size; k++)
			MPI_Recv(&got, 1, MPI_INT, MPI_ANY_SOURCE, 50, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		MPI_Ibcast(&token, 1, MPI_INT, 0, MPI_COMM_WORLD, &bq);
		MPI_Wait(&bq, MPI_STATUS_IGNORE);
	} else {
		int flag = 0;
		MPI_Ibcast(&token, 1, MPI_INT, 0, MPI_COMM_WORLD, &bq);
		MPI_Test(&bq, &flag, MPI_STATUS_IGNORE);
		if (flag) {
			fprintf(stderr, "calls: a broadcast completed before its root started it\n");
			return 1;
		}
		MPI_Send(&token, 1, MPI_INT, 0, 50, MPI_COMM_WORLD);
		while (!flag)
			MPI_Test(&bq, &flag, MPI_STATUS_IGNORE);
	}
	if (token != 0) {
		fprintf(stderr, "calls: the broadcast brought %d\n", token);
		return 1;
	}

	MPI_Finalize();
	return 0;
}
