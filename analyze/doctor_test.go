package analyze

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/commprof/commprof/trace"
)

// Scenarios of in-flight states built by hand, each with the rank the
// construction put at fault.

func blockedIn(rank int, op, comm string, seq int64, members []int) *trace.InFlight {
	return &trace.InFlight{Rank: rank, World: 4, State: trace.InFlightBlocked, Kind: trace.InFlightCollective, Op: op,
		Comm: comm, Seq: seq, Bytes: 64, Root: -1, Peer: -1, Members: members}
}

func computing(rank int, lastOp string, lastSeq int64) *trace.InFlight {
	return &trace.InFlight{Rank: rank, World: 4, State: trace.InFlightComputing, Kind: trace.InFlightCollective, Op: lastOp,
		Comm: "world", Seq: lastSeq, Bytes: 64, Root: -1, Peer: -1}
}

func p2p(rank int, kind trace.InFlightKind, peer int) *trace.InFlight {
	op := "recv"
	if kind == trace.InFlightSend {
		op = "send"
	}
	return &trace.InFlight{Rank: rank, World: 4, State: trace.InFlightBlocked, Kind: kind, Op: op, Comm: "world", Seq: 7, Root: -1, Peer: peer}
}

var all4 = []int{0, 1, 2, 3}

// halfBytes is f with its last call on half the bytes.
func halfBytes(f *trace.InFlight) *trace.InFlight {
	f.Bytes /= 2
	return f
}

func TestDiagnose(t *testing.T) {
	cases := []struct {
		name     string
		in       DoctorInput
		verdict  string
		culprits []int
		mismatch []string // fields of the first mismatch, nil for none
		sentence string   // in the summary
	}{
		{
			name: "a rank stopped before a collective",
			in: DoctorInput{Live: true, InFlight: []*trace.InFlight{blockedIn(0, "allreduce", "world", 5, all4),
				computing(1, "allreduce", 4), blockedIn(2, "allreduce", "world", 5, all4), blockedIn(3, "allreduce", "world", 5, all4)}},
			verdict: "hang", culprits: []int{1}, mismatch: []string{"missing"},
			sentence: "rank 1 has not entered allreduce #6 on world; ranks 0, 2, 3 wait in it",
		},
		{
			name: "a rank called another collective",
			in: DoctorInput{Live: true, InFlight: []*trace.InFlight{blockedIn(0, "allreduce", "world", 3, all4),
				blockedIn(1, "allreduce", "world", 3, all4), blockedIn(2, "allreduce", "world", 3, all4), blockedIn(3, "broadcast", "world", 3, all4)}},
			verdict: "mismatch", culprits: []int{3}, mismatch: []string{"op"},
			sentence: "at call #4 on world rank 3 called broadcast, ranks 0-2 allreduce",
		},
		{
			name: "waits through receives to a computing rank",
			in: DoctorInput{Live: true, InFlight: []*trace.InFlight{p2p(0, trace.InFlightRecv, 1), p2p(1, trace.InFlightRecv, 2),
				computing(2, "allreduce", 1), blockedIn(3, "barrier", "world", 2, all4)}},
			verdict: "hang", culprits: []int{2},
		},
		{
			name: "two ranks receive from each other first",
			in: DoctorInput{Live: true, InFlight: []*trace.InFlight{p2p(0, trace.InFlightRecv, 1), p2p(1, trace.InFlightRecv, 0),
				blockedIn(2, "barrier", "world", 2, all4), blockedIn(3, "barrier", "world", 2, all4)}},
			verdict: "hang", culprits: []int{0, 1},
		},
		{
			name: "a sub-communicator waits only for its members",
			in: DoctorInput{Live: true, InFlight: []*trace.InFlight{blockedIn(0, "allreduce", "world/split0:0", 2, []int{0, 2}),
				computing(1, "allreduce", 9), computing(2, "allreduce", 1), computing(3, "allreduce", 9)}},
			verdict: "hang", culprits: []int{2},
		},
		{
			// The injected mismatch as recorded: ranks 1-3 made call #4,
			// rank 3 with half the bytes; their failure aborted the job
			// while rank 0 was still in the barrier before it, which then
			// failed too. Rank 0 was stopped, not missing of its own doing.
			name: "a rank the others' failure stopped before the mismatched call",
			in: DoctorInput{Ended: true, Status: trace.StatusFailed,
				InFlight: []*trace.InFlight{failed(computing(0, "barrier", 2)), failed(computing(1, "allreduce", 3)),
					failed(computing(2, "allreduce", 3)), failed(halfBytes(computing(3, "allreduce", 3)))}},
			verdict: "mismatch", culprits: []int{3}, mismatch: []string{"bytes"},
		},
		{
			name: "a rank that died inside the call the others failed in",
			in: DoctorInput{Ended: true, Status: trace.StatusFailed, ExitStatus: map[int]int{2: 137},
				InFlight: []*trace.InFlight{failed(computing(0, "allreduce", 4)), failed(computing(1, "allreduce", 4)),
					blockedIn(2, "allreduce", "world", 4, all4), failed(computing(3, "allreduce", 4))}},
			verdict: "died", culprits: []int{2},
			sentence: "rank 2 died (exit status 137) inside allreduce #5 on world",
		},
		{
			name: "traces only: a rank whose calls stop (an NCCL log)",
			in: DoctorInput{World: 3, Status: trace.StatusComplete, Imported: true, Streams: map[int]bool{0: true, 1: true, 2: true},
				Calls: map[int][]DoctorCall{0: calls(6, ""), 1: calls(4, ""), 2: calls(6, "")}},
			verdict: "hang", culprits: []int{1}, mismatch: []string{"missing"},
			sentence: "rank 1 has no call #5 on world",
		},
		{
			name: "traces only: a reduction of another size",
			in: DoctorInput{World: 3, Status: trace.StatusComplete, Streams: map[int]bool{0: true, 1: true, 2: true},
				Calls: map[int][]DoctorCall{0: calls(6, ""), 1: calls(6, ""), 2: calls(6, "size")}},
			verdict: "mismatch", culprits: []int{2}, mismatch: []string{"bytes"},
		},
		{
			name: "a clean run",
			in: DoctorInput{World: 2, Status: trace.StatusComplete, Ended: true, Streams: map[int]bool{0: true, 1: true},
				Calls:    map[int][]DoctorCall{0: calls(6, ""), 1: calls(6, "")},
				InFlight: []*trace.InFlight{finished(0), finished(1)}},
			verdict: "ok", culprits: []int{},
		},
		{
			name: "a rank that never arrived",
			in: DoctorInput{Live: true, World: 3, InFlight: []*trace.InFlight{world3(blockedIn(0, "barrier", "world", 0, []int{0, 1, 2})),
				world3(blockedIn(1, "barrier", "world", 0, []int{0, 1, 2}))}},
			verdict: "hang", culprits: []int{2},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.in.Now = time.Now()
			d := Diagnose(c.in)
			if d.Verdict != c.verdict || !slices.Equal(d.Culprits, c.culprits) {
				t.Errorf("verdict %q, culprits %v; want %q, %v\n%s", d.Verdict, d.Culprits, c.verdict, c.culprits, strings.Join(d.Summary, "\n"))
			}
			switch {
			case c.mismatch == nil && len(d.Mismatches) > 0 && c.verdict == "ok":
				t.Errorf("mismatches in a clean run: %+v", d.Mismatches)
			case c.mismatch != nil && (len(d.Mismatches) == 0 || !slices.Equal(d.Mismatches[0].Fields, c.mismatch)):
				t.Errorf("mismatches %+v, want the first on %v", d.Mismatches, c.mismatch)
			}
			if c.sentence != "" && !strings.Contains(strings.Join(d.Summary, "\n"), c.sentence) {
				t.Errorf("summary does not say %q:\n%s", c.sentence, strings.Join(d.Summary, "\n"))
			}
			for _, r := range c.culprits {
				if !d.Ranks[r].Culprit {
					t.Errorf("rank %d not marked culprit", r)
				}
			}
		})
	}
}

func world3(f *trace.InFlight) *trace.InFlight { f.World = 3; return f }

func failed(f *trace.InFlight) *trace.InFlight { f.Error = 1; return f }

func finished(r int) *trace.InFlight {
	return &trace.InFlight{Rank: r, World: 2, State: trace.InFlightFinished, Kind: trace.InFlightCollective, Op: "allreduce", Comm: "world", Seq: 5, Bytes: 64, Root: -1, Peer: -1}
}

// calls are n allreduces on world; "size" makes the fourth one smaller.
func calls(n int, fault string) []DoctorCall {
	var out []DoctorCall
	for i := range n {
		c := DoctorCall{Comm: "world", Seq: int64(i), Op: "allreduce", Bytes: 64, DType: "float32", Root: -1}
		if fault == "size" && i == 3 {
			c.Bytes = 32
		}
		out = append(out, c)
	}
	return out
}

func TestRankList(t *testing.T) {
	for in, want := range map[string]string{"3": "rank 3", "0 1 2": "ranks 0-2", "0 2 3": "ranks 0, 2, 3", "0 1 2 5 7 8 9": "ranks 0-2, 5, 7-9"} {
		var rs []int
		for _, f := range strings.Fields(in) {
			rs = append(rs, int(f[0]-'0'))
		}
		if got := RankList(rs); got != want {
			t.Errorf("RankList(%v) = %q, want %q", rs, got, want)
		}
	}
}
