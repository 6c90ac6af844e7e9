package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/trace"
)

// record records a small bench run and returns its directory.
func recordBench(t *testing.T, dir string, ranks, op, algo, max string) string {
	t.Helper()
	r := commprof(t, nil, "record", "--ranks", ranks, "--out", dir, "--", "bench", op, "--algo", algo, "--min", "1K", "--max", max,
		"--factor", "4", "--iters", "3", "--warmup", "1")
	if r.code != 0 {
		t.Fatalf("record: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	return dir
}

func statsJSON(t *testing.T, dir string) *analyze.Summary {
	t.Helper()
	r := commprof(t, nil, "stats", dir, "--format", "json")
	if r.code != 0 {
		t.Fatalf("stats: exit %d\n%s", r.code, r.stderr)
	}
	var s analyze.Summary
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("stats JSON: %v\n%s", err, r.stdout)
	}
	return &s
}

// Each algorithm, recorded for real, is recognised from its own messages.
func TestPatternsOfRecordedRuns(t *testing.T) {
	for _, tc := range []struct {
		op, algo, ranks, want string
	}{
		{"allreduce", "ring", "4", analyze.PatternRing},
		{"allreduce", "ring", "3", analyze.PatternRing},
		{"allreduce", "recursive_doubling", "4", analyze.PatternButterfly},
		{"allreduce", "rabenseifner", "8", analyze.PatternButterfly},
		{"allreduce", "tree", "4", analyze.PatternTree},
		{"broadcast", "tree", "8", analyze.PatternTree},
		{"broadcast", "chain", "4", analyze.PatternChain},
		{"allgather", "ring", "4", analyze.PatternRing},
		{"reducescatter", "ring", "5", analyze.PatternRing},
	} {
		t.Run(tc.op+"-"+tc.algo+"-"+tc.ranks, func(t *testing.T) {
			s := statsJSON(t, recordBench(t, filepath.Join(t.TempDir(), "run"), tc.ranks, tc.op, tc.algo, "64K"))
			var got []string
			for _, p := range s.Patterns {
				if p.Op == tc.op && p.Algo == tc.algo {
					got = append(got, p.Pattern)
					if p.Agree != p.Sampled || p.Sampled == 0 {
						t.Errorf("%+v: samples disagree", p)
					}
				}
			}
			if len(got) != 1 || got[0] != tc.want {
				t.Fatalf("patterns of %s %s on %s ranks: %v, want %s (all: %+v)", tc.op, tc.algo, tc.ranks, got, tc.want, s.Patterns)
			}
			for _, o := range s.Ops {
				if o.Op == tc.op && o.Pattern != tc.want {
					t.Fatalf("op %s labelled %q", o.Op, o.Pattern)
				}
			}
		})
	}
}

func TestStatsDiff(t *testing.T) {
	base := t.TempDir()
	a := recordBench(t, filepath.Join(base, "a"), "2", "allreduce", "ring", "4M")
	b := recordBench(t, filepath.Join(base, "b"), "4", "allreduce", "ring", "4M")

	s := statsJSON(t, b)
	if s.SchemaVersion != analyze.SchemaVersion || s.Run.WorldSize != 4 || len(s.Ranks) != 4 || s.Run.Events == 0 || s.Fit.Messages == 0 {
		t.Fatalf("summary: %+v", s.Run)
	}
	// 1K..4M by 4: 7 sizes of 3 timed iterations each; the warm-up,
	// the checked call and bench's own gathering of its results are
	// outside bench's timed loops and left out.
	sizes := map[int]int64{}
	for _, c := range s.Collectives {
		if c.Op == "allreduce" {
			sizes[c.Bucket] = c.Calls
		}
	}
	if len(sizes) != 7 || sizes[analyze.SizeBucket(1024)] != 3 || sizes[analyze.SizeBucket(4<<20)] != 3 {
		t.Errorf("allreduce calls by size bucket: %v", sizes)
	}

	r := commprof(t, nil, "stats", b)
	if r.code != 0 || !strings.Contains(r.stdout, "Collectives by op, algorithm and size") || !strings.Contains(r.stdout, "allreduce  ring") {
		t.Fatalf("stats table: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, by := range []string{"rank", "size", "step", "peer"} {
		r := commprof(t, nil, "stats", b, "--by", by, "--format", "csv")
		recs, err := csv.NewReader(strings.NewReader(r.stdout)).ReadAll()
		if r.code != 0 || err != nil || len(recs) < 1 {
			t.Fatalf("stats --by %s csv: exit %d %v\n%s", by, r.code, err, r.stdout)
		}
		switch by {
		case "rank":
			if len(recs) != 5 || recs[0][0] != "rank" {
				t.Errorf("rank csv: %v", recs)
			}
		case "peer":
			// A ring of 4: each rank sends data to one other (the barriers'
			// empty messages go elsewhere).
			data := 0
			for _, rec := range recs[1:] {
				if rec[2] != "0" {
					data++
				}
			}
			if data != 4 || recs[0][2] != "bytes" || recs[0][4] != "recv_time_ns" {
				t.Errorf("peer csv: %v", recs)
			}
		}
	}

	r = commprof(t, nil, "diff", a, b, "--all")
	if r.code != 0 || !strings.Contains(r.stdout, "configuration: ranks \"2\" -> \"4\"") || !strings.Contains(r.stdout, "allreduce busbw") {
		t.Fatalf("diff: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = commprof(t, nil, "diff", a, b, "--format", "json")
	var d analyze.Diff
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil || d.A.WorldSize != 2 || d.B.WorldSize != 4 || len(d.Changes) == 0 {
		t.Fatalf("diff json: %v %+v", err, d.A)
	}

	// predict on recorded runs: a projection when their fit is usable,
	// else the reason and a non-zero exit (a busy machine can make it
	// so). Its figures are checked below on runs whose times are known.
	r = commprof(t, nil, "predict", a, b, "--ranks", "8")
	if r.code == 0 && !strings.Contains(r.stdout, "Projected allreduce time per run") ||
		r.code != 0 && (r.code != 1 || !strings.Contains(r.stderr, "no projection: ")) {
		t.Fatalf("predict on recorded runs: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// modelRun writes a run of p ranks whose ring allreduces, 3 per size from
// 1 KiB to 4 MiB, take exactly the alpha-beta-gamma model's time.
func modelRun(t *testing.T, dir string, p int, alpha, beta, gamma float64) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m := &trace.Manifest{FormatVersion: trace.FormatVersion, Name: fmt.Sprintf("model-%dr", p), WorldSize: p, Launcher: "local",
		Command: []string{"bench", "allreduce"}, Config: map[string]string{"program": "bench", "ranks": strconv.Itoa(p)},
		Status: trace.StatusComplete, Start: time.Unix(1_700_000_000, 0), End: time.Unix(1_700_000_010, 0)}
	fp := float64(p)
	for r := range p {
		var evs []trace.Event
		seq, at := int64(0), int64(1_000)
		for n := int64(1 << 10); n <= 4<<20; n *= 4 {
			fn := float64(n)
			dur := int64(2*(fp-1)*alpha + 2*(fp-1)/fp*fn*beta + (fp-1)/fp*fn*gamma)
			for range 3 {
				evs = append(evs, trace.Event{Rank: int32(r), Kind: trace.KindCollective, Name: "allreduce", Algo: "ring", DType: "float32", Comm: "world",
					Start: at, Dur: dur, Bytes: n, Seq: seq, Peer: -1, Step: -1, Root: -1, Chunk: -1})
				seq++
				at += dur + 1_000
			}
		}
		f, err := os.Create(filepath.Join(dir, trace.RankFile(r)))
		if err != nil {
			t.Fatal(err)
		}
		w, err := trace.NewWriter(f, trace.RankInfo{Rank: r, WorldSize: p, Host: "h0"}, trace.WriterOptions{})
		if err == nil {
			err = w.Write(evs)
		}
		if err == nil {
			err = w.Close()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
		m.Ranks = append(m.Ranks, trace.RankEntry{Rank: r, Host: "h0", File: trace.RankFile(r), CPUs: 64})
	}
	if err := trace.WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	return dir
}

// predict fits the runs it is given and projects them: on runs timed by a
// known model it recovers the model, projects 8 and 4096 ranks, and
// checks a run against it.
func TestPredict(t *testing.T) {
	const alpha, beta, gamma = 20_000, 0.5, 0.1 // ns, ns/byte, ns/byte
	base := t.TempDir()
	a := modelRun(t, filepath.Join(base, "a"), 2, alpha, beta, gamma)
	b := modelRun(t, filepath.Join(base, "b"), 4, alpha, beta, gamma)
	r := commprof(t, nil, "predict", a, b, "--ranks", "8,4096", "--check", b, "--format", "json")
	var p analyze.Prediction
	if err := json.Unmarshal([]byte(r.stdout), &p); err != nil || r.code != 0 {
		t.Fatalf("predict: exit %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if !equalInts(p.Fit.RankCounts, []int{2, 4}) || p.Projection.Current != 2 || len(p.Projection.TimeNS) != 4 || p.Check == nil || p.Check.Ranks != 4 {
		t.Fatalf("predict: %+v %+v", p.Fit, p.Projection)
	}
	// A ring's bytes cost 2 beta + gamma per (p-1)/p n: its calls alone
	// cannot tell beta from gamma, only their sum.
	if perByte := 2*p.Fit.BetaNSPerB + p.Fit.GammaNSPerB; !p.Fit.Usable || math.Abs(p.Fit.AlphaNS-alpha)/alpha > 0.05 || math.Abs(perByte-(2*beta+gamma))/(2*beta+gamma) > 0.05 {
		t.Errorf("fit alpha %.0f ns, 2 beta + gamma %.3f ns/byte; the runs were timed with %d and %.3f", p.Fit.AlphaNS, perByte, alpha, 2*beta+gamma)
	}
	for _, c := range p.Check.Calls {
		if math.Abs(c.ModeledNS-c.MeasuredNS)/c.MeasuredNS > 0.05 {
			t.Errorf("check %d B: modeled %.0f ns, measured %.0f", c.Bytes, c.ModeledNS, c.MeasuredNS)
		}
	}
	for i, algo := range p.Projection.Algos {
		// (Far apart: per-byte costs fitted by message size may favour
		// the smaller messages of more ranks, but not by 500 latencies.)
		if !(p.Projection.TimeNS[i][1] > p.Projection.TimeNS[i][0]) {
			t.Errorf("%s: 4096 ranks (%v) not slower than 8 (%v)", algo, p.Projection.TimeNS[i][1], p.Projection.TimeNS[i][0])
		}
		// The ring at 8 ranks is the model's own time: 14 alpha + 7/4 n beta + 7/8 n gamma per call.
		if algo == "ring" {
			var want float64
			for n := float64(1 << 10); n <= 4<<20; n *= 4 {
				want += 3 * (14*alpha + 2*7.0/8*n*beta + 7.0/8*n*gamma)
			}
			if got := p.Projection.TimeNS[i][0]; math.Abs(got-want)/want > 0.05 {
				t.Errorf("ring at 8 ranks: %.0f ns, the model %.0f", got, want)
			}
		}
	}
	r = commprof(t, nil, "predict", a, "--ranks", "8")
	if r.code != 0 || !strings.Contains(r.stdout, "Projected allreduce time per run") {
		t.Fatalf("predict table: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestAnalyzerBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"stats", filepath.Join(dir, "nosuch")}, 1, "nosuch"},
		{[]string{"stats", dir}, 1, "holds no rank-NNNNN.arrows"},
		{[]string{"stats", dir, "--by", "color"}, 2, "--by"},
		{[]string{"stats", dir, "--format", "xml"}, 2, "--format"},
		{[]string{"stats"}, 2, "takes 1 argument"},
		{[]string{"diff", dir}, 2, "takes 2 argument"},
		{[]string{"predict", dir, "--ranks", "eight"}, 2, "--ranks"},
		{[]string{"predict", dir, "--algo", "magic"}, 2, "--algo"},
		{[]string{"bench", "read", filepath.Join(dir, "nosuch")}, 1, "nosuch"},
		{[]string{"bench", "read", dir, "--columns", "some"}, 2, "--columns"},
		{[]string{"bench", "read", dir, "--repeat", "0"}, 2, "--repeat"},
	} {
		r := commprof(t, nil, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "panic") {
			t.Errorf("commprof %v: exit %d, want %d with %q\n%s", tc.args, r.code, tc.code, tc.want, r.stderr)
		}
	}
}

// bench read counts every event of a recorded run, whichever columns it
// decodes.
func TestBenchRead(t *testing.T) {
	dir := recordBench(t, filepath.Join(t.TempDir(), "run"), "2", "allreduce", "ring", "16K")
	want := statsJSON(t, dir).Run.Events
	for _, cols := range []string{"summary", "all"} {
		r := commprof(t, nil, "bench", "read", dir, "--columns", cols, "--repeat", "2", "--json")
		if r.code != 0 {
			t.Fatalf("bench read: exit %d\n%s", r.code, r.stderr)
		}
		var got struct {
			Events  int64 `json:"events"`
			Streams int   `json:"streams"`
			Reads   []struct {
				EventsPerSec float64 `json:"events_per_sec"`
			} `json:"reads"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatal(err)
		}
		if got.Events != want || got.Streams != 2 || len(got.Reads) != 2 || got.Reads[0].EventsPerSec <= 0 {
			t.Errorf("--columns %s: %+v; stats counts %d events", cols, got, want)
		}
	}
}
