#!/usr/bin/env bash
# Traced against untraced `commprof bench allreduce`, for docs/benchmarks.md.
#
#   bench/traced.sh NP REPEATS [MIN MAX FACTOR ITERS]
#
# Runs the benchmark plain and under `commprof record` alternately, REPEATS
# times each, and prints per size the median busbw of each and their ratio,
# then the size of the last recorded run. Timings on a shared VM are noisy:
# quote the medians.
set -euo pipefail
cd "$(dirname "$0")/.."
np=${1:?usage: bench/traced.sh NP REPEATS [MIN MAX FACTOR ITERS]}
reps=${2:?usage: bench/traced.sh NP REPEATS [MIN MAX FACTOR ITERS]}
min=${3:-64K} max=${4:-64M} factor=${5:-4} iters=${6:-20}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
make -s build >/dev/null
args=(bench allreduce --min "$min" --max "$max" --factor "$factor" --iters "$iters" --warmup 5)
for r in $(seq "$reps"); do
	bin/commprof "${args[@]}" --ranks "$np" | grep -v '^#' | tail -n +2 >"$tmp/plain.$r"
	rm -rf "$tmp/run"
	bin/commprof record --ranks "$np" --out "$tmp/run" -- "${args[@]}" >"$tmp/rec.out"
	grep -v '^#' "$tmp/rec.out" | awk 'NF == 8 && $1 ~ /^[0-9]+$/' >"$tmp/traced.$r"
done
cat "$tmp"/plain.* | awk '{print $1, $7}' >"$tmp/p"
cat "$tmp"/traced.* | awk '{print $1, $7}' >"$tmp/t"
echo "# $np ranks, $reps alternating runs of each, median busbw (GB/s)"
printf "%10s %12s %12s %8s\n" "size(B)" "untraced" "traced" "ratio"
awk '
function median(list,   n, a, i, j, t) {
	n = split(list, a, " ")
	for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j+1] = a[j]; a[j+1] = t }
	return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
}
FNR == NR { p[$1] = p[$1] " " $2; sizes[++ns] = $1; next }
{ t[$1] = t[$1] " " $2 }
END {
	for (i = 1; i <= ns; i++) {
		s = sizes[i]; if (s in seen) continue; seen[s] = 1
		a = median(p[s]); b = median(t[s])
		printf "%10d %12.3f %12.3f %8.3f\n", s, a, b, (a > 0 ? b / a : 0)
	}
}' "$tmp/p" "$tmp/t"
grep '^recorded' "$tmp/rec.out" | sed "s|$tmp/run|the last run|"
