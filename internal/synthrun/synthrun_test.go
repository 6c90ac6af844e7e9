package synthrun

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/commprof/commprof/trace"
)

// TestWrite reads a generated run back: every rank's stream whole, the
// events the options ask for, the held-back rank the last to arrive at
// every allreduce by at least its delay less the compute jitter, and a
// manifest that says the run is synthetic.
func TestWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	o := Options{Ranks: 12, RanksPerHost: 4, Steps: 3, Late: map[int]int64{5: 4_000_000}}
	if err := Write(dir, o); err != nil {
		t.Fatal(err)
	}
	run, err := trace.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Problems) > 0 || len(run.Ranks) != 12 {
		t.Fatalf("%d ranks, problems %v", len(run.Ranks), run.Problems)
	}
	if m := run.Manifest; m.Source == nil || m.Source.Format != Format || m.WorldSize != 12 || m.Ranks[7].Host != "node0001" {
		t.Fatalf("manifest %+v", m)
	}
	// Per step: the step, forward, and per call backward, the call and a
	// send and a receive per round with a peer (12 ranks: rounds 1, 2, 4
	// always have one, round 8 only for ranks 0-3).
	calls := map[int64]map[int32]int64{}
	for _, rk := range run.Ranks {
		peers := 3
		if rk.Info.Rank < 4 {
			peers = 4
		}
		if want := o.Steps * (2 + 2*(2+2*peers)); len(rk.Events) != want {
			t.Errorf("rank %d: %d events, want %d", rk.Info.Rank, len(rk.Events), want)
		}
		for _, e := range rk.Events {
			if e.Kind == trace.KindCollective {
				if calls[e.Seq] == nil {
					calls[e.Seq] = map[int32]int64{}
				}
				calls[e.Seq][e.Rank] = e.Start
			}
		}
	}
	if len(calls) != o.Steps*2 {
		t.Fatalf("%d calls, want %d", len(calls), o.Steps*2)
	}
	for seq, starts := range calls {
		for r, at := range starts {
			if r != 5 && starts[5]-at < 4_000_000-int64(2*jitter*(forwardNS+backwardNS)) {
				t.Errorf("call %d: rank 5 arrived %d ns after rank %d; it was held back 4 ms", seq, starts[5]-at, r)
			}
		}
	}
	if err := Write(dir, o); err == nil {
		t.Error("wrote over a run")
	}
	if _, err := os.Stat(filepath.Join(dir, trace.RankFile(12))); err == nil {
		t.Error("a stream of a rank beyond the world")
	}
}
