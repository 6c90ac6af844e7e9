package pmpi

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/commprof/commprof/trace"
)

// TestCommunicatorMemory records testdata/comms.c, which makes and frees
// 10,000 rounds of communicators (20,001 in all, each duplicate made from
// the last) and datatypes: what the library holds for them after the
// last round is what it held after the thousandth — as many
// descriptions, as many table slots, no more bytes but for the lengths of
// names, and no names held once written — and every communicator got a name of its own, of
// bounded length, alike on every rank.
func TestCommunicatorMemory(t *testing.T) {
	const rounds = 10000
	for _, f := range []Flavor{OpenMPI, MPICH} {
		t.Run(string(f), func(t *testing.T) {
			m := findMPI(t, f)
			prog := cProgram(t, m, "comms")
			library(t, m)
			dir := filepath.Join(t.TempDir(), "run")
			args := append(append([]string{"record", "--out", dir, "--", m.run}, m.args...), "-np", "2", prog, strconv.Itoa(rounds))
			res := command(t, nil, "", commprofBin(t), args...)
			if res.err != nil {
				t.Fatalf("record: %v\n%s%s", res.err, res.stdout, res.stderr)
			}
			type held struct{ comms, bytes, slots, names int64 }
			at := map[int]held{}
			for _, l := range regexp.MustCompile(`(?m)^memory (\d+) (\d+) (\d+) (\d+) (\d+)$`).FindAllStringSubmatch(res.stdout, -1) {
				var v [5]int64
				for i := range v {
					v[i], _ = strconv.ParseInt(l[i+1], 10, 64)
				}
				at[int(v[0])] = held{v[1], v[2], v[3], v[4]}
			}
			early, late := at[rounds/10], at[rounds]
			if len(at) != 2 || early.comms == 0 {
				t.Fatalf("the program said %v:\n%s%s", at, res.stdout, res.stderr)
			}
			// Names' lengths differ by at most the longest name's.
			if late.comms != early.comms || late.slots != early.slots || late.bytes > early.bytes+96 || late.names != 0 ||
				early.names != 0 {
				t.Errorf("after %d rounds the library holds %+v, after %d %+v", rounds/10, early, rounds, late)
			}

			run := readRun(t, dir)
			if len(run.Ranks) != 2 || len(run.Problems) != 0 || run.Manifest.Status != trace.StatusComplete {
				t.Fatalf("%d ranks, problems %v, status %s", len(run.Ranks), run.Problems, run.Manifest.Status)
			}
			var names [2][]string
			for _, rk := range run.Ranks {
				r := rk.Info.Rank
				seen := map[string]bool{}
				recvs := 0
				for _, e := range rk.Events {
					switch {
					case e.Kind == trace.KindMark && e.Name == MarkComm:
						if seen[e.Comm] || len(e.Comm) > 96 {
							t.Errorf("rank %d: communicator name %q is reused or longer than 96", r, e.Comm)
						}
						seen[e.Comm] = true
						names[r] = append(names[r], e.Comm)
					case e.Kind == trace.KindRecv && e.Peer == int32(r) && e.Bytes == 4:
						recvs++ // on a communicator freed before its receive completed
					}
				}
				if want := 1 + 1 + 2*rounds; len(seen) != want {
					t.Errorf("rank %d: %d communicators named, want %d", r, len(seen), want)
				}
				if recvs != rounds {
					t.Errorf("rank %d: %d receives on freed communicators recorded, want %d", r, recvs, rounds)
				}
			}
			if fmt.Sprint(names[0]) != fmt.Sprint(names[1]) {
				t.Error("the ranks named their communicators differently")
			}
		})
	}
}
