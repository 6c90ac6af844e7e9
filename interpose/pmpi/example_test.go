package pmpi

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/commprof/commprof/trace"
)

// TestExampleTrainer records examples/mpi4py/train.py, the data-parallel
// trainer a user writes with mpi4py, on 2 ranks for one short epoch: the
// initial parameters broadcast once, each step's two gradient buckets
// allreduced without blocking and waited for, the epoch's figures
// allreduced, and the model learning. Then the README's walk-through:
// the same model trained by `commprof train`, and every command that
// reads a run run on the recorded one.
func TestExampleTrainer(t *testing.T) {
	m := findMPI(t, OpenMPI)
	py := python(t)
	library(t, m)
	bin := commprofBin(t)
	dir := filepath.Join(t.TempDir(), "run")
	script, _ := filepath.Abs("../../examples/mpi4py/train.py")
	res := command(t, nil, "", bin, "record", "--out", dir, "--", "mpirun", "--allow-run-as-root", "--oversubscribe",
		"-np", "2", py, script, "--synthetic-size", "1200", "--epochs", "1", "--batch-size", "32", "--bucket-mb", "0.1")
	if res.err != nil {
		t.Fatalf("record: %v\n%s%s", res.err, res.stdout, res.stderr)
	}
	acc := regexp.MustCompile(`test acc ([0-9.]+)`).FindStringSubmatch(res.stdout)
	if acc == nil {
		t.Fatalf("no test accuracy in the output:\n%s", res.stdout)
	}
	if a, _ := strconv.ParseFloat(acc[1], 64); a < 0.5 {
		t.Errorf("test accuracy %v after an epoch, want at least 0.5 (chance is 0.1)", a)
	}
	run := readRun(t, dir)
	const params = 784*256 + 256 + 256*128 + 128 + 128*10 + 10
	// Buckets from the last layer: layers 3 and 2 (over 0.1 MiB), then layer 1.
	top, bottom := int64(4*(params-(784*256+256))), int64(4*(784*256+256))
	const steps = 1200 / (32 * 2)
	for _, rk := range run.Ranks {
		var bcast, waits, epochSums int
		buckets := map[int64]int{}
		for _, e := range rk.Events {
			switch {
			case e.Kind == trace.KindCollective && e.Name == "broadcast":
				bcast++
				if e.Bytes != 4*params || e.Root != 0 || e.Seq != 0 || e.DType != "float32" {
					t.Errorf("rank %d: the parameters' broadcast is %+v", rk.Info.Rank, e)
				}
			case e.Kind == trace.KindCollective && e.Name == "allreduce" && e.DType == "float32":
				buckets[e.Bytes]++
			case e.Kind == trace.KindCollective && e.Name == "allreduce" && e.DType == "float64":
				epochSums++
			case e.Kind == trace.KindWait && e.Name == "allreduce":
				waits++
			}
		}
		if bcast != 1 || buckets[top] != steps || buckets[bottom] != steps || len(buckets) != 2 || waits != 2*steps || epochSums != 2 {
			t.Errorf("rank %d: %d broadcasts, buckets %v (want %d of %d and of %d bytes), %d waits, %d epoch allreduces",
				rk.Info.Rank, bcast, buckets, steps, top, bottom, waits, epochSums)
		}
	}
	checkSpans(t, run)

	events := 0
	for _, rk := range run.Ranks {
		events += len(rk.Events)
	}
	train := filepath.Join(t.TempDir(), "train")
	out := func(args ...string) string {
		t.Helper()
		res := command(t, nil, "", bin, args...)
		if res.err != nil {
			t.Fatalf("commprof %s: %v\n%s%s", strings.Join(args, " "), res.err, res.stdout, res.stderr)
		}
		return res.stdout
	}
	out("record", "--ranks", "2", "--out", train, "--", "train", "--synthetic-size", "1200", "--epochs", "1", "--batch-size", "32",
		"--bucket-mb", "0.1")

	t.Run("stats", func(t *testing.T) {
		var s struct {
			Unknown     []string `json:"unknown"`
			Collectives []struct {
				Op    string `json:"op"`
				Calls int64  `json:"calls"`
				Bytes int64  `json:"bytes"`
			} `json:"collectives"`
			Ranks []struct {
				ComputeNS  int64 `json:"compute_ns"`
				ExposedNS  int64 `json:"exposed_ns"`
				CommNS     int64 `json:"comm_ns"`
				Overlapped int64 `json:"overlapped_ns"`
			} `json:"ranks"`
		}
		if err := json.Unmarshal([]byte(out("stats", dir, "--format", "json")), &s); err != nil {
			t.Fatal(err)
		}
		calls := map[string]int64{}
		for _, c := range s.Collectives {
			calls[c.Op] += c.Calls
		}
		if !slices.Contains(s.Unknown, "compute") || !slices.Contains(s.Unknown, "recv_wait") || slices.Contains(s.Unknown, "exposed") {
			t.Errorf("unknown figures %q, want compute and recv_wait, not exposed", s.Unknown)
		}
		if calls["allreduce"] != 2*steps+2 || calls["broadcast"] != 1 || len(s.Ranks) != 2 {
			t.Errorf("stats: %v calls, %d ranks", calls, len(s.Ranks))
		}
		for r, rk := range s.Ranks {
			// Non-blocking allreduces behind the program's work: some of
			// the communication is not exposed.
			if rk.ComputeNS != 0 || rk.ExposedNS <= 0 || rk.Overlapped <= 0 || rk.ExposedNS+rk.Overlapped != rk.CommNS {
				t.Errorf("rank %d: %+v", r, rk)
			}
		}
	})

	t.Run("report", func(t *testing.T) {
		page := filepath.Join(t.TempDir(), "report.html")
		out("report", dir, "-o", page)
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		text := html.UnescapeString(string(b))
		for _, want := range []string{"Not in the source: messages inside the MPI library's collective algorithms.",
			"not its compute between them", "from an MPI program through the PMPI library"} {
			if !strings.Contains(text, want) {
				t.Errorf("the page does not say %q", want)
			}
		}
		if strings.Contains(text, "the tool's own phases") {
			t.Error("the page takes PMPI's missing compute for a tool's phases")
		}
	})

	t.Run("diff", func(t *testing.T) {
		var d struct {
			A struct {
				Name string `json:"name"`
			} `json:"a"`
			B struct {
				Name   string `json:"name"`
				Source struct {
					Format string `json:"format"`
				} `json:"source"`
			} `json:"b"`
			Changes []struct {
				Metric string `json:"metric"`
			} `json:"changes"`
		}
		if err := json.Unmarshal([]byte(out("diff", train, dir, "--format", "json")), &d); err != nil {
			t.Fatal(err)
		}
		if d.A.Name != "train" || d.B.Name != "mpi-train" || d.B.Source.Format != "pmpi" ||
			!slices.ContainsFunc(d.Changes, func(c struct {
				Metric string `json:"metric"`
			}) bool {
				return c.Metric == "allreduce busbw"
			}) {
			t.Errorf("diff: a %q, b %q from %q, %d changes", d.A.Name, d.B.Name, d.B.Source.Format, len(d.Changes))
		}
		page := filepath.Join(t.TempDir(), "diff.html")
		out("diff", train, dir, "--html", page)
		if st, err := os.Stat(page); err != nil || st.Size() == 0 {
			t.Errorf("diff --html: %v", err)
		}
	})

	t.Run("export", func(t *testing.T) {
		for _, f := range []string{"perfetto", "pprof", "csv"} {
			file := filepath.Join(t.TempDir(), "run."+f)
			out("export", dir, "--format", f, "-o", file)
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			switch f {
			case "perfetto":
				var tr struct {
					TraceEvents []json.RawMessage `json:"traceEvents"`
				}
				if err := json.Unmarshal(b, &tr); err != nil || len(tr.TraceEvents) < events {
					t.Errorf("perfetto: %d trace events for %d events: %v", len(tr.TraceEvents), events, err)
				}
			case "pprof":
				if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
					t.Errorf("pprof: not a gzipped profile (%d bytes)", len(b))
				}
			case "csv":
				rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
				if err != nil || len(rows) != events+1 {
					t.Errorf("csv: %d rows for %d events: %v", len(rows), events, err)
				}
			}
		}
	})
}
