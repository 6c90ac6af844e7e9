package export

import (
	"bytes"
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/envnames"
	"github.com/commprof/commprof/internal/units"
	"github.com/commprof/commprof/trace"
)

// stackOf returns a sample's frames from the root to the leaf.
func stackOf(s *profile.Sample) []string {
	var frames []string
	for _, l := range s.Location {
		for _, ln := range l.Line {
			frames = append(frames, ln.Function.Name)
		}
	}
	slices.Reverse(frames)
	return frames
}

func TestExportPProf(t *testing.T) {
	run := testRun()
	var buf bytes.Buffer
	if err := PProf(&buf, run); err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CheckValid(); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, st := range p.SampleType {
		types = append(types, st.Type+"/"+st.Unit)
	}
	if want := []string{"time/nanoseconds", "bytes/bytes", "messages/count", "wait/nanoseconds"}; !slices.Equal(types, want) {
		t.Errorf("sample types %v, want %v", types, want)
	}
	if p.DefaultSampleType != SampleTime || p.TimeNanos != run.Manifest.Start.UnixNano() {
		t.Errorf("default sample type %q, time %d", p.DefaultSampleType, p.TimeNanos)
	}

	// The totals are the sums over every send and receive.
	var want [4]int64
	for _, rk := range run.Ranks {
		for _, e := range rk.Events {
			if e.Kind == trace.KindSend || e.Kind == trace.KindRecv {
				want[0] += e.Dur
				want[1] += e.Bytes
				want[2]++
				want[3] += e.Wait
			}
		}
	}
	var got [4]int64
	seen := map[string]bool{}
	byStack := map[string][]int64{}
	for _, s := range p.Sample {
		for i, v := range s.Value {
			got[i] += v
		}
		st := stackOf(s)
		key := strings.Join(st, " > ")
		if seen[key] {
			t.Errorf("two samples with stack %s", key)
		}
		seen[key] = true
		byStack[key] = s.Value
		// rank > op > algorithm > peer > size, and the kind label says
		// the same as the peer frame.
		if len(st) != 5 || !strings.HasPrefix(st[0], "rank ") || st[1] != "allreduce" || st[2] != "ring" ||
			!(strings.HasPrefix(st[3], "send to peer ") || strings.HasPrefix(st[3], "recv from peer ")) ||
			!strings.HasSuffix(st[4], "iB") {
			t.Errorf("stack %q", st)
		}
		if kind := s.Label["kind"]; len(kind) != 1 || !strings.HasPrefix(st[3], kind[0]) {
			t.Errorf("stack %q labelled %v", st, s.Label)
		}
	}
	if got != want {
		t.Errorf("totals %v, want %v (time, bytes, messages, wait)", got, want)
	}

	// Frames in the right order, with the values of their events:
	// rank 0's two 2 KiB receives from rank 1 and its 1 MiB send to rank 2.
	for stack, v := range map[string][4]int64{
		"rank 0 > allreduce > ring > recv from peer 1 > 2KiB-4KiB": {5_123 + 2_001, 4096, 2, 1_000},
		"rank 0 > allreduce > ring > send to peer 2 > 1MiB-2MiB":   {5_000, 1 << 20, 1, 0},
		"rank 1 > allreduce > ring > send to peer 0 > 2KiB-4KiB":   {1_600 + 1_000, 4096, 2, 0},
	} {
		if g := byStack[stack]; !slices.Equal(g, v[:]) {
			t.Errorf("%s: %v, want %v", stack, g, v)
		}
	}
	if len(p.Sample) != 8 {
		t.Errorf("%d samples, want 8: %v", len(p.Sample), seen)
	}
}

func TestExportSizeLabel(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0B"}, {-5, "0B"}, {1, "1B-2B"}, {3, "2B-4B"}, {1023, "512B-1KiB"}, {1024, "1KiB-2KiB"},
		{65536, "64KiB-128KiB"}, {131071, "64KiB-128KiB"}, {1 << 20, "1MiB-2MiB"}, {3 << 30, "2GiB-4GiB"},
		{1 << 40, "1TiB-2TiB"}, {math.MaxInt64, "4EiB-8EiB"},
	} {
		if got := units.Bucket(analyze.SizeBucket(tc.n)); got != tc.want { // the labels of every table
			t.Errorf("%d bytes: %s, want %s", tc.n, got, tc.want)
		}
	}
}

// hasTrace reports whether the output of pprof -traces has a sample whose
// frames, leaf first, are frames.
func hasTrace(out string, frames ...string) bool {
	value := regexp.MustCompile(`^\s*\S+\s{2,}`) // the sample's value before its leaf
	for _, block := range strings.Split(out, "-----------+") {
		var got []string
		for _, line := range strings.Split(block, "\n") {
			if strings.TrimSpace(line) == "" || strings.Contains(line, "kind:") || strings.HasPrefix(line, "---") {
				continue
			}
			if len(got) == 0 {
				line = value.ReplaceAllString(line, "")
			}
			got = append(got, strings.TrimSpace(line))
		}
		if slices.Equal(got, frames) {
			return true
		}
	}
	return false
}

// TestPProfTool opens the profile with `go tool pprof`, the reader users
// run, and checks that it sees the frames.
func TestExportPProfTool(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv(envnames.RequireDeps) == "1" {
			t.Fatal("go is not on PATH, and COMMPROF_REQUIRE_DEPS=1")
		}
		t.Skip("go is not on PATH: cannot run go tool pprof")
	}
	file := filepath.Join(t.TempDir(), "comm.pb.gz")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := PProf(f, testRun()); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"-top", "-nodefraction=0"}, []string{"Type: time", "rank 0", "rank 1", "allreduce", "ring",
			"send to peer 2", "recv from peer 1", "2KiB-4KiB", "1MiB-2MiB"}},
		{[]string{"-top", "-nodefraction=0", "-sample_index=bytes", "-tagfocus=kind=send"}, []string{"Type: bytes", "send to peer 1"}},
		{[]string{"-traces"}, []string{"Type: time"}},
	} {
		cmd := exec.CommandContext(ctx, goBin, append(append([]string{"tool", "pprof"}, tc.args...), file)...)
		cmd.Env = append(os.Environ(), "PPROF_TMPDIR="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go tool pprof %v: %v\n%s", tc.args, err, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("go tool pprof %v does not mention %q:\n%s", tc.args, w, out)
			}
		}
		if slices.Contains(tc.args, "-tagfocus=kind=send") && strings.Contains(string(out), "recv from") {
			t.Errorf("-tagfocus=kind=send still shows receives:\n%s", out)
		}
		if tc.args[0] == "-traces" && !hasTrace(string(out), "2KiB-4KiB", "recv from peer 1", "ring", "allreduce", "rank 0") {
			t.Errorf("go tool pprof -traces shows no stack leaf to root 2KiB-4KiB, recv from peer 1, ring, allreduce, rank 0:\n%s", out)
		}
	}
}
