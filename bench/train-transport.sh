#!/usr/bin/env bash
# `commprof train` over shared memory against over TCP, for
# docs/benchmarks.md.
#
#   bench/train-transport.sh NP REPEATS [TRAIN FLAGS...]
#
# Runs `commprof train --ranks NP --quiet TRAIN FLAGS` with
# COMMPROF_TRANSPORT=shm and with COMMPROF_TRANSPORT=tcp alternately,
# REPEATS times each (default flags: --epochs 3, on the embedded synthetic
# set; e.g. `--data /usr/share/datasets/fashion-mnist --epochs 2` for
# Fashion-MNIST). It prints each run's images/s per epoch, then for each
# transport the median and range over its runs of the mean images/s of
# epochs 2 on (of epoch 1 if there is only one: the first epoch also pays
# the start-up, fresh buffers' page faults and the spin's first guesses)
# and of the share of time spent waiting for gradients, and the ratio of
# the medians (shm / tcp; above 1, shared memory trains faster). Timings
# on a shared 2-core VM are noisy: quote the medians of alternating runs.
# COMMPROF_BIN names a commprof binary to use instead of building
# bin/commprof; KEEP=DIR keeps every run's output in DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: bench/train-transport.sh NP REPEATS [TRAIN FLAGS...]"
np=${1:?$usage}
reps=${2:?$usage}
shift 2
flags=("$@")
if [ ${#flags[@]} -eq 0 ]; then
	flags=(--epochs 3)
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cp=${COMMPROF_BIN:-bin/commprof}
if [ -z "${COMMPROF_BIN:-}" ]; then
	make -s build >/dev/null
fi
for r in $(seq "$reps"); do
	for tr in shm tcp; do
		COMMPROF_TRANSPORT=$tr "$cp" train --ranks "$np" --quiet "${flags[@]}" >"$tmp/$tr.$r"
		# epoch N  loss ...  test acc ...  I images/s  lr ...  waiting for gradients W%
		awk -v tr="$tr" -v run="$r" '$1 == "epoch" {
			for (i = 1; i < NF; i++) {
				if ($(i+1) == "images/s") ips = $i
				if ($i == "gradients") wait = $(i+1)
			}
			sub(/%$/, "", wait)
			print tr, run, $2, ips, wait
		}' "$tmp/$tr.$r" >>"$tmp/epochs"
		if ! grep -q '^epoch' "$tmp/$tr.$r"; then
			echo "COMMPROF_TRANSPORT=$tr: no epoch line:" >&2
			cat "$tmp/$tr.$r" >&2
			exit 1
		fi
	done
done
if [ -n "${KEEP:-}" ]; then
	mkdir -p "$KEEP"
	cp "$tmp"/shm.* "$tmp"/tcp.* "$KEEP"/
fi
echo "# commprof train on $np ranks, ${flags[*]}: $reps alternating runs over each transport; commprof $("$cp" version | cut -d' ' -f2)"
grep -h '^#' "$tmp/shm.1" | head -1
printf "%-4s %4s %s\n" "via" "run" "images/s by epoch"
awk '{ l[$1 " " $2] = l[$1 " " $2] " " $4; if (!($1 " " $2 in seen)) { seen[$1 " " $2] = 1; order[++n] = $1 " " $2 } }
END { for (i = 1; i <= n; i++) { split(order[i], k, " "); printf "%-4s %4d %s\n", k[1], k[2], l[order[i]] } }' "$tmp/epochs"
awk -f bench/stats.awk -f /dev/stdin "$tmp/epochs" <<'AWK'
{ last[$1 " " $2] = $3 + 0; rows[NR] = $0 }
END {
	# The mean of each run over epochs 2 on (1 if it has only one).
	for (i = 1; i <= NR; i++) {
		split(rows[i], f, " "); k = f[1] " " f[2]
		if (f[3] + 0 == 1 && last[k] > 1) continue
		ips[k] += f[4]; wait[k] += f[5]; cnt[k]++
	}
	for (k in cnt) {
		split(k, f, " ")
		runs[f[1]] = runs[f[1]] " " ips[k] / cnt[k]
		waits[f[1]] = waits[f[1]] " " wait[k] / cnt[k]
	}
	printf "%-4s %14s %14s %22s\n", "via", "images/s", "range", "waiting for gradients"
	for (t = 0; t < 2; t++) {
		tr = t == 0 ? "shm" : "tcp"
		m[tr] = median(runs[tr])
		printf "%-4s %14.0f %14s %21.0f%%\n", tr, m[tr], range(runs[tr], "%.0f"), median(waits[tr])
	}
	printf "shm / tcp images/s: %.2f\n", (m["tcp"] > 0 ? m["shm"] / m["tcp"] : 0)
}
AWK
