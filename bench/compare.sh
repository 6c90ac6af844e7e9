#!/usr/bin/env bash
# Interleaved comparison of `commprof bench allreduce` and Open MPI's
# MPI_Allreduce (bench/mpi), for docs/benchmarks.md.
#
#   bench/compare.sh NP REPEATS [MIN MAX FACTOR ITERS]
#   TRANSPORT=shm bench/compare.sh NP REPEATS [MIN MAX FACTOR ITERS]
#
# TRANSPORT picks what both sides run over: tcp (the default) runs
# commprof with COMMPROF_TRANSPORT=tcp and Open MPI with `--mca btl
# tcp,self` on loopback; shm runs commprof with COMMPROF_TRANSPORT=shm and
# Open MPI with `--mca btl vader,self`, its shared-memory transport.
#
# Runs both benchmarks REPEATS times, alternating, on NP ranks, and prints
# for each size the median time and busbw of each and their ratio, then
# the range (min-max) of each side's busbw and time over the runs. Timings
# on a shared 2-core VM are noisy: the medians and ranges of alternating
# runs are what the docs quote; the output repeats commprof's line saying
# how rank 0 reached its peers. Extra commprof flags can be passed in
# COMMPROF_FLAGS; KEEP=DIR keeps every run's table in DIR; COMMPROF_BIN
# names a commprof binary to use instead of building bin/commprof.
set -euo pipefail
cd "$(dirname "$0")/.."
np=${1:?usage: bench/compare.sh NP REPEATS [MIN MAX FACTOR ITERS]}
reps=${2:?usage: bench/compare.sh NP REPEATS [MIN MAX FACTOR ITERS]}
min=${3:-8} max=${4:-64M} factor=${5:-2} iters=${6:-20}
transport=${TRANSPORT:-tcp}
case $transport in
tcp) btl=(--mca btl tcp,self --mca btl_tcp_if_include lo) ;;
shm) btl=(--mca btl vader,self) ;;
*)
	echo "TRANSPORT=$transport: want tcp or shm" >&2
	exit 2
	;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cp=${COMMPROF_BIN:-bin/commprof}
if [ -z "${COMMPROF_BIN:-}" ]; then
	make -s build >/dev/null
fi
(cd bench/mpi && mpicc -O2 -o mpi_allreduce mpi_allreduce.c)
for r in $(seq "$reps"); do
	# shellcheck disable=SC2086
	COMMPROF_TRANSPORT=$transport "$cp" bench allreduce --ranks "$np" --min "$min" --max "$max" --factor "$factor" \
		--iters "$iters" --warmup 5 ${COMMPROF_FLAGS:-} >"$tmp/raw.out"
	grep "^# rank 0's links" "$tmp/raw.out" >"$tmp/links" || true
	grep -v '^#' "$tmp/raw.out" | tail -n +2 >"$tmp/cp.$r"
	(cd bench/mpi && mpirun --allow-run-as-root --oversubscribe "${btl[@]}" -np "$np" ./mpi_allreduce -b "$min" -e "$max" -f "$factor" \
		-n "$iters" -w 5) | grep -v '^#' | tail -n +2 >"$tmp/mpi.$r"
done
if [ -n "${KEEP:-}" ]; then
	mkdir -p "$KEEP"
	cp "$tmp"/cp.* "$tmp"/mpi.* "$KEEP"/
fi
cat "$tmp"/cp.* | awk '{print $1, $4, $5, $7, $8}' >"$tmp/cp"
cat "$tmp"/mpi.* | awk '{print $1, $4, $5, $7, $8}' >"$tmp/mpi"
echo "# $np ranks over $transport (Open MPI: ${btl[*]}), $reps alternating runs of each, medians; commprof $("$cp" version | cut -d' ' -f2)"
cat "$tmp/links"
printf "%10s %19s %12s %10s %12s %10s %8s %8s %7s %15s %15s\n" "size(B)" "commprof algo" "cp time(us)" "cp busbw" "mpi time(us)" "mpi busbw" "bw ratio" "t ratio" "#wrong" "cp busbw range" "mpi busbw range"
awk -f bench/stats.awk -f /dev/stdin "$tmp/cp" "$tmp/mpi" <<'AWK'
FNR == NR { ct[$1] = ct[$1] " " $3; cb[$1] = cb[$1] " " $4; algo[$1] = $2; w[$1] += $5; sizes[++ns] = $1; next }
{ mt[$1] = mt[$1] " " $3; mb[$1] = mb[$1] " " $4; w[$1] += $5 }
END {
	for (i = 1; i <= ns; i++) {
		s = sizes[i]; if (s in seen) continue; seen[s] = 1
		c = median(cb[s]); m = median(mb[s])
		tc = median(ct[s]); tm = median(mt[s])
		printf "%10d %19s %12.1f %10.3f %12.1f %10.3f %8.2f %8.2f %7d %15s %15s\n", s, algo[s], tc, c, tm, m, (m > 0 ? c / m : 0), (tm > 0 ? tc / tm : 0), w[s], range(cb[s], "%.3f"), range(mb[s], "%.3f")
	}
}
AWK
