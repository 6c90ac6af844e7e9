#!/usr/bin/env bash
# What the PMPI library costs, for docs/benchmarks.md ("PMPI interposition").
# Builds bench/pmpi_bench.c with Open MPI's compiler wrapper and runs, with
# bin/libcommprof-pmpi-openmpi.so (make pmpi):
#
#  1. the per-call cost: 8-byte MPI_Allreduce on one rank, in rounds that
#     alternate recording and MPI_Pcontrol(0) (paused), and clock_gettime:
#     rounds of 10,000 calls (which the library's buffers hold: the cost to
#     the calling thread) and of 1,000,000 (which they do not: the calls
#     then wait for the writer);
#  2. 8-byte MPI_Allreduce latency on 2 ranks, over shared memory (Open
#     MPI's default here) and over TCP on loopback (as bench/mpi measures):
#     a. in one job under the library, blocks recording and blocks paused
#        by MPI_Pcontrol(0), alternating: both see the same machine;
#     b. whole runs without and with the library loaded (and recording),
#        alternating PAIRS times in this one run; each pair's ratio, then
#        their median.
#
# PAIRS (default 10), ITERS (allreduces per run over shared memory,
# default 200000; a tenth of it over TCP).
set -euo pipefail
cd "$(dirname "$0")"
root=$(cd ../../.. && pwd)
lib=$root/bin/libcommprof-pmpi-openmpi.so
[ -f "$lib" ] || { echo "run.sh: $lib is missing: make pmpi" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpicc.openmpi -O2 -o "$tmp/pmpi_bench" pmpi_bench.c
mpirun="mpirun.openmpi --allow-run-as-root --oversubscribe"

for calls in 10000 1000000; do
    COMMPROF_TRACE_DIR=$tmp/percall$calls LD_PRELOAD=$lib $mpirun -x LD_PRELOAD -x COMMPROF_TRACE_DIR \
        -np 1 "$tmp/pmpi_bench" percall "$calls" 20
    rm -rf "$tmp/percall$calls"
done

pairs=${PAIRS:-10}
iters=${ITERS:-200000}
for transport in shm tcp; do
    opts="" n=10000
    [ $transport = tcp ] && opts="--mca btl tcp,self --mca btl_tcp_if_include lo" n=500
    echo "8-byte MPI_Allreduce on 2 ranks over $transport, recording and paused in one job:"
    # shellcheck disable=SC2086
    COMMPROF_TRACE_DIR=$tmp/toggle LD_PRELOAD=$lib $mpirun $opts -x LD_PRELOAD -x COMMPROF_TRACE_DIR \
        -np 2 "$tmp/pmpi_bench" toggle "$n" 40
    rm -rf "$tmp/toggle"
done
for transport in shm tcp; do
    opts="" n=$iters
    [ $transport = tcp ] && opts="--mca btl tcp,self --mca btl_tcp_if_include lo" n=$((iters / 10))
    ratios=()
    echo "8-byte MPI_Allreduce on 2 ranks over $transport, $n calls a run:"
    printf '%4s %12s %12s %7s\n' pair without_us with_us ratio
    for i in $(seq 1 "$pairs"); do
        # shellcheck disable=SC2086
        off=$($mpirun $opts -np 2 "$tmp/pmpi_bench" allreduce "$n" | awk '{print $2}')
        # shellcheck disable=SC2086
        on=$(COMMPROF_TRACE_DIR=$tmp/$transport$i LD_PRELOAD=$lib $mpirun $opts -x LD_PRELOAD -x COMMPROF_TRACE_DIR \
            -np 2 "$tmp/pmpi_bench" allreduce "$n" | awk '{print $2}')
        rm -rf "$tmp/$transport$i"
        r=$(awk -v a="$on" -v b="$off" 'BEGIN{printf "%.3f", a/b}')
        ratios+=("$r")
        printf '%4d %12s %12s %7s\n' "$i" "$off" "$on" "$r"
    done
    printf '%s\n' "${ratios[@]}" | sort -n | awk -v t=$transport '{v[NR]=$1} END{m = NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2; printf "median ratio with/without over %s: %.3f (%d pairs; lowest %.3f, highest %.3f)\n", t, m, NR, v[1], v[NR]}'
done
