#!/usr/bin/env bash
# How often the straggler verdict is wrong, for docs/metrics.md: clean
# runs that name a rank (false positives) and runs with a known stall
# whose stalled rank is not named first (false negatives), with the named
# rank's cost against the stall.
#
#   bench/verdicts.sh RUNS [quiet|loaded] [KIND...]
#
# Each KIND is recorded RUNS times clean and RUNS times with a stall, on
# 4 ranks:
#   train      commprof's trainer (record --ranks 4 -- train --epochs 2
#              --synthetic-size 16000: 125 steps of one allreduce each);
#              the stall is --inject delay:rank=R,dur=30ms,every=10 (30 ms
#              before one call in ten)
#   ompi-coll  interpose/pmpi/testdata/stall.c under Open MPI, MPI_Allreduce
#   ompi-halo  the same, Irecv/Isend to both neighbours and Waitall
#   mpich-coll, mpich-halo   the same under MPICH
#   py-halo    stall.py (mpi4py) under Open MPI, the halo exchange
# (default: train ompi-coll ompi-halo). The MPI programs' stall is 30 ms
# before one iteration in ten (6 of 60, 2 ms of work each); the stalled
# rank goes round the ranks. "loaded" keeps one of the two cores busy
# with a spinning process for the whole measurement. The rates printed
# are of this machine; quote them with the command.
# COMMPROF_BIN names a commprof binary to use instead of building
# bin/commprof; KEEP=DIR keeps every run in DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: bench/verdicts.sh RUNS [quiet|loaded] [KIND...]"
runs=${1:?$usage}
load=${2:-quiet}
shift $(($# < 2 ? $# : 2))
kinds=("$@")
if [ ${#kinds[@]} -eq 0 ]; then
	kinds=(train ompi-coll ompi-halo)
fi
case $load in quiet | loaded) ;; *) echo "$usage" >&2; exit 2 ;; esac
tmp=${KEEP:-$(mktemp -d)}
mkdir -p "$tmp"
hog=
cleanup() {
	if [ -n "$hog" ]; then kill "$hog" 2>/dev/null || true; fi
	if [ -z "${KEEP:-}" ]; then rm -rf "$tmp"; fi
}
trap cleanup EXIT

cp=${COMMPROF_BIN:-bin/commprof}
if [ -z "${COMMPROF_BIN:-}" ]; then
	make -s build >/dev/null
fi
prog() { # the stall program for an MPI flavor, built once
	local out=$tmp/stall-$1
	[ -x "$out" ] || "mpicc.$1" -O2 -o "$out" interpose/pmpi/testdata/stall.c 2>/dev/null
	echo "$out"
}
if [ "$load" = loaded ]; then
	taskset -c 0 sh -c 'while :; do :; done' &
	hog=$!
fi

# record KIND SLOW DIR: one run, stalled on rank SLOW (-1: clean).
record() {
	local kind=$1 slow=$2 dir=$3
	case $kind in
	train)
		local inj=()
		[ "$slow" -ge 0 ] && inj=(--inject "delay:rank=$slow,dur=30ms,every=10")
		"$cp" record --ranks 4 --out "$dir" "${inj[@]}" -- train --epochs 2 --synthetic-size 16000 ;;
	ompi-*)
		"$cp" record --out "$dir" -- mpirun.openmpi --allow-run-as-root --oversubscribe -np 4 \
			"$(prog openmpi)" "${kind#ompi-}" "$slow" 30 10 60 2 ;;
	mpich-*)
		"$cp" record --out "$dir" -- mpirun.mpich -np 4 "$(prog mpich)" "${kind#mpich-}" "$slow" 30 10 60 2 ;;
	py-*)
		"$cp" record --out "$dir" -- mpirun.openmpi --allow-run-as-root --oversubscribe -np 4 \
			/usr/bin/python3 interpose/pmpi/testdata/stall.py "${kind#py-}" "$slow" 30 10 60 2 ;;
	*) echo "unknown kind $kind" >&2; exit 2 ;;
	esac
}

# verdict DIR SLOW: "named first-named cost_ns stalled_ns" of a run.
verdict() {
	"$cp" stats --format json "$1" >"$1/stats.json"
	"$cp" dump "$1" --kind mark --format csv >"$1/marks.csv"
	/usr/bin/python3 - "$1" "$2" <<'EOF'
import csv, json, sys
d, slow = sys.argv[1], int(sys.argv[2])
st = json.load(open(d + "/stats.json"))["stragglers"]
named = st.get("named") or []
cost = next((r["cost_ns"] for r in st.get("ranks", []) if named and r["rank"] == named[0]), 0)
stalled = 0
if slow >= 0:
    # the trainer's delays, as its marks say; the MPI programs': 6 x 30 ms
    stops = [int(float(m["value"])) for m in csv.DictReader(open(d + "/marks.csv")) if m["name"] == "inject.delay"]
    stalled = sum(stops) if stops else 6 * 30_000_000
print(len(named), named[0] if named else -1, cost, stalled, st.get("noise_bound_ns", 0))
EOF
}

printf '%-11s %-6s %5s %9s %9s %s\n' kind load runs "clean:fp" "stall:fn" "cost/stalled median (range)"
for kind in "${kinds[@]}"; do
	fp=0 fn=0 ratios=""
	for i in $(seq "$runs"); do
		d=$tmp/$kind-clean-$i
		record "$kind" -1 "$d" >"$d.log" 2>&1 || { echo "$kind clean run $i failed:"; tail -3 "$d.log"; continue; }
		read -r n _ _ _ _ < <(verdict "$d" -1)
		[ "$n" -gt 0 ] && fp=$((fp + 1))
		slow=$((i % 4))
		d=$tmp/$kind-stall-$i
		record "$kind" "$slow" "$d" >"$d.log" 2>&1 || { echo "$kind stalled run $i failed:"; tail -3 "$d.log"; continue; }
		read -r n first cost stalled _ < <(verdict "$d" "$slow")
		if [ "$first" != "$slow" ]; then
			fn=$((fn + 1))
		else
			ratios="$ratios $(awk -v c="$cost" -v s="$stalled" 'BEGIN { printf "%.2f", c / s }')"
		fi
	done
	echo '{ if (NF) printf "%.2f (%s)", median($0), range($0, "%.2f"); else printf "-" }' >"$tmp/sum.awk"
	summary=$(echo "$ratios" | awk -f bench/stats.awk -f "$tmp/sum.awk")
	printf '%-11s %-6s %5d %9s %9s %s\n' "$kind" "$load" "$runs" "$fp/$runs" "$fn/$runs" "$summary"
done
