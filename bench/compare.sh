#!/usr/bin/env bash
# Interleaved comparison of `commprof bench allreduce` and Open MPI's
# MPI_Allreduce over TCP (bench/mpi), for docs/benchmarks.md.
#
#   bench/compare.sh NP REPEATS [MIN MAX FACTOR ITERS]
#
# Runs both benchmarks REPEATS times, alternating, on NP ranks, and prints
# for each size the median time and busbw of each and their ratio. Timings
# on a shared 2-core VM are noisy: the medians of alternating runs are what
# the docs quote. Extra commprof flags can be passed in COMMPROF_FLAGS.
set -euo pipefail
cd "$(dirname "$0")/.."
np=${1:?usage: bench/compare.sh NP REPEATS [MIN MAX FACTOR ITERS]}
reps=${2:?usage: bench/compare.sh NP REPEATS [MIN MAX FACTOR ITERS]}
min=${3:-8} max=${4:-64M} factor=${5:-2} iters=${6:-20}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

make -s build >/dev/null
(cd bench/mpi && mpicc -O2 -o mpi_allreduce mpi_allreduce.c)
for r in $(seq "$reps"); do
	# shellcheck disable=SC2086
	bin/commprof bench allreduce --ranks "$np" --min "$min" --max "$max" --factor "$factor" \
		--iters "$iters" --warmup 5 ${COMMPROF_FLAGS:-} | grep -v '^#' | tail -n +2 >"$tmp/cp.$r"
	(cd bench/mpi && mpirun --allow-run-as-root --oversubscribe --mca btl tcp,self \
		--mca btl_tcp_if_include lo -np "$np" ./mpi_allreduce -b "$min" -e "$max" -f "$factor" \
		-n "$iters" -w 5) | grep -v '^#' | tail -n +2 >"$tmp/mpi.$r"
done
cat "$tmp"/cp.* | awk '{print $1, $4, $5, $7, $8}' >"$tmp/cp"
cat "$tmp"/mpi.* | awk '{print $1, $4, $5, $7, $8}' >"$tmp/mpi"
echo "# $np ranks, $reps alternating runs of each, medians; commprof $(bin/commprof version | cut -d' ' -f2)"
printf "%10s %19s %12s %10s %12s %10s %8s %7s\n" "size(B)" "commprof algo" "cp time(us)" "cp busbw" "mpi time(us)" "mpi busbw" "cp/mpi" "#wrong"
awk '
function median(list,   n, a, i, j, t) {
	n = split(list, a, " ")
	for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j+1] = a[j]; a[j+1] = t }
	return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
}
FNR == NR { ct[$1] = ct[$1] " " $3; cb[$1] = cb[$1] " " $4; algo[$1] = $2; w[$1] += $5; sizes[++ns] = $1; next }
{ mt[$1] = mt[$1] " " $3; mb[$1] = mb[$1] " " $4; w[$1] += $5 }
END {
	for (i = 1; i <= ns; i++) {
		s = sizes[i]; if (s in seen) continue; seen[s] = 1
		c = median(cb[s]); m = median(mb[s])
		printf "%10d %19s %12.1f %10.3f %12.1f %10.3f %8.2f %7d\n", s, algo[s], median(ct[s]), c, median(mt[s]), m, (m > 0 ? c / m : 0), w[s]
	}
}' "$tmp/cp" "$tmp/mpi"
