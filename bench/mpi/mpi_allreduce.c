/*
 * mpi_allreduce.c - MPI_Allreduce (float32, sum) bandwidth benchmark that
 * reports results the way nccl-tests' all_reduce_perf does, so they can be
 * compared with commprof's own Go benchmark.
 *
 * Usage: mpirun -np N mpi_allreduce [-b MIN] [-e MAX] [-f FACTOR]
 *                                   [-n ITERS] [-w WARMUP]
 *   -b, -e  smallest / largest message size in bytes; K, M, G suffixes are
 *           powers of 1024 (default 8 and 64M). MIN must be a multiple of 4.
 *   -f      multiply the size by FACTOR each step (default 4)
 *   -n      timed iterations per size (default 20)
 *   -w      untimed warm-up iterations per size (default 5)
 *
 * For every size, out of place, the same way as `commprof bench` and
 * nccl-tests: warm-up iterations, each checked; MPI_Barrier; ITERS
 * iterations back to back under one MPI_Wtime timer; then one more checked
 * iteration. Checks fill the receive buffer with NaN first and compare
 * every element, outside the timed region. time(us) is the maximum over
 * ranks of each rank's mean iteration time; algbw = bytes / time;
 * busbw = algbw * 2(n-1)/n; #wrong is the number of wrong elements summed
 * over the checked iterations and ranks.
 * Exit status: 0 ok, 1 some result was wrong, 2 bad command line.
 */
#define _POSIX_C_SOURCE 200809L /* for getopt() */

#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PATTERN 7 /* element i of rank r is (r+1) * (i % PATTERN + 1) */

/* Parse a byte count with an optional K/M/G (1024-based) suffix. */
static int parse_size(const char *s, size_t *out)
{
    char *end;
    unsigned long long v, mult = 1;

    if (*s < '0' || *s > '9') /* strtoull would accept "-1" and " 1" */
        return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0)
        return -1;
    switch (*end) {
    case 'K': case 'k': mult = 1ULL << 10; end++; break;
    case 'M': case 'm': mult = 1ULL << 20; end++; break;
    case 'G': case 'g': mult = 1ULL << 30; end++; break;
    }
    if (*end != '\0' || v > SIZE_MAX / mult)
        return -1;
    *out = (size_t)(v * mult);
    return 0;
}

/* Parse a non-negative int with no trailing characters. */
static int parse_int(const char *s, int *out)
{
    char *end;
    long v;

    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > INT_MAX)
        return -1;
    *out = (int)v;
    return 0;
}

/* Count the elements of recv that differ from the exact expected sum. */
static long long check(const float *recv, int count, const float *expect)
{
    long long wrong = 0;
    int k = 0;

    for (int i = 0; i < count; i++) {
        if (recv[i] != expect[k])
            wrong++;
        if (++k == PATTERN)
            k = 0;
    }
    return wrong;
}

/* One checked MPI_Allreduce; adds its duration to *elapsed if non-NULL. */
static long long run_checked(const float *send, float *recv, int count,
                             const float *expect)
{
    /* All-ones bytes are a NaN, so a result that was never written fails. */
    memset(recv, 0xff, (size_t)count * sizeof(float));
    MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    return check(recv, count, expect);
}

int main(int argc, char **argv)
{
    size_t min_bytes = 8, max_bytes = (size_t)64 << 20;
    int factor = 4, iters = 20, warmup = 5;
    int rank, nranks, opt;
    char err[160] = "";

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    /* Every rank parses the same arguments, so all agree on errors. */
    opterr = 0; /* report errors ourselves, and only on rank 0 */
    while (!err[0] && (opt = getopt(argc, argv, ":b:e:f:n:w:")) != -1) {
        int bad = 0;
        switch (opt) {
        case 'b': bad = parse_size(optarg, &min_bytes); break;
        case 'e': bad = parse_size(optarg, &max_bytes); break;
        case 'f': bad = parse_int(optarg, &factor); break;
        case 'n': bad = parse_int(optarg, &iters); break;
        case 'w': bad = parse_int(optarg, &warmup); break;
        case ':':
            snprintf(err, sizeof err, "option -%c needs a value", optopt);
            break;
        default:
            snprintf(err, sizeof err, "unknown option -%c", optopt);
            break;
        }
        if (bad)
            snprintf(err, sizeof err, "bad value for -%c: '%s'", opt, optarg);
    }
    if (!err[0]) { /* the options parsed; now check their values */
        if (optind < argc)
            snprintf(err, sizeof err, "unexpected argument '%s'", argv[optind]);
        else if (min_bytes < 4 || min_bytes % 4 != 0)
            snprintf(err, sizeof err, "-b must be a positive multiple of 4");
        else if (max_bytes < min_bytes)
            snprintf(err, sizeof err, "-e must be at least -b");
        else if (max_bytes / sizeof(float) > INT_MAX)
            snprintf(err, sizeof err, "-e too large for an int element count");
        else if (factor < 2)
            snprintf(err, sizeof err, "-f must be at least 2");
        else if (iters < 1)
            snprintf(err, sizeof err, "-n must be at least 1");
    }
    if (err[0]) {
        if (rank == 0)
            fprintf(stderr, "mpi_allreduce: %s\nusage: mpi_allreduce [-b MIN]"
                    " [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP]\n", err);
        MPI_Finalize();
        return 2;
    }

    /* Largest size actually run; buffers are allocated once for it. */
    size_t top = min_bytes;
    while (top <= max_bytes / (size_t)factor)
        top *= (size_t)factor;
    int top_count = (int)(top / sizeof(float));

    float *send = malloc(top);
    float *recv = malloc(top);
    if (send == NULL || recv == NULL) {
        fprintf(stderr, "mpi_allreduce: rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    /* Small integers: every partial sum is exact in float32 in any order. */
    float expect[PATTERN];
    for (int k = 0; k < PATTERN; k++)
        expect[k] = (float)nranks * (float)(nranks + 1) / 2.0f * (float)(k + 1);
    for (int i = 0; i < top_count; i++)
        send[i] = (float)(rank + 1) * (float)(i % PATTERN + 1);

    if (rank == 0) {
        printf("# mpi_allreduce: %d ranks, MPI_Allreduce float32 sum out-of-place,"
               " -b %zu -e %zu -f %d -n %d -w %d\n",
               nranks, min_bytes, max_bytes, factor, iters, warmup);
        printf("%12s %12s %8s %6s %12s %12s %12s %8s\n", "size(B)", "count",
               "type", "algo", "time(us)", "algbw(GB/s)", "busbw(GB/s)",
               "#wrong");
    }

    long long total_wrong = 0;
    for (size_t bytes = min_bytes;; bytes *= (size_t)factor) {
        int count = (int)(bytes / sizeof(float));
        long long wrong = 0;
        double elapsed = 0.0;

        for (int it = 0; it < warmup; it++)
            wrong += run_checked(send, recv, count, expect);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int it = 0; it < iters; it++)
            MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        elapsed = MPI_Wtime() - t0;
        wrong += run_checked(send, recv, count, expect);

        /* Slowest rank's mean iteration time; wrong elements over ranks. */
        double mean = elapsed / iters, time;
        MPI_Allreduce(&mean, &time, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG_LONG, MPI_SUM,
                      MPI_COMM_WORLD);
        total_wrong += wrong;

        if (rank == 0) {
            double algbw = (double)bytes / time / 1e9;
            double busbw = algbw * 2.0 * (nranks - 1) / nranks;
            printf("%12zu %12d %8s %6s %12.1f %12.3f %12.3f %8lld\n", bytes,
                   count, "float32", "mpi", time * 1e6, algbw, busbw, wrong);
            fflush(stdout);
        }
        if (bytes > max_bytes / (size_t)factor)
            break;
    }

    free(send);
    free(recv);
    MPI_Finalize();
    return total_wrong != 0 ? 1 : 0;
}
