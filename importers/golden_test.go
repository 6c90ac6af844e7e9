package importers

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/commprof/commprof/trace"
)

// describe prints an imported run: its manifest's facts and every event,
// one per line, in a stable order.
func describe(res *Result, run *trace.Run) string {
	var b strings.Builder
	m := res.Manifest
	fmt.Fprintf(&b, "format %s world %d status %s\n", res.Format, m.WorldSize, m.Status)
	if m.Error != "" {
		fmt.Fprintf(&b, "error %s\n", m.Error)
	}
	fmt.Fprintf(&b, "tool %s\n", m.Source.Tool)
	if m.Source.Untimed || m.Source.NoDurations || m.Source.PartialRanks {
		fmt.Fprintf(&b, "untimed %v no_durations %v partial_ranks %v\n", m.Source.Untimed, m.Source.NoDurations, m.Source.PartialRanks)
	}
	if !m.Start.IsZero() {
		fmt.Fprintf(&b, "start %s\n", m.Start.Format("2006-01-02T15:04:05.000000Z07:00"))
	}
	for _, k := range sortedKeys(m.Config) {
		fmt.Fprintf(&b, "config %s=%s\n", k, m.Config[k])
	}
	for _, k := range sortedKeys(m.Metrics) {
		fmt.Fprintf(&b, "metric %s=%g\n", k, m.Metrics[k])
	}
	for _, s := range m.Source.Missing {
		fmt.Fprintf(&b, "missing %s\n", s)
	}
	for _, k := range sortedKeys(m.Source.Skipped) {
		fmt.Fprintf(&b, "skipped %d %s\n", m.Source.Skipped[k], k)
	}
	for _, r := range m.Ranks {
		fmt.Fprintf(&b, "rank %d host %q pid %d file %s\n", r.Rank, r.Host, r.PID, r.File)
	}
	evs := events(run, 0, "")
	slices.SortStableFunc(evs, func(a, b trace.Event) int {
		return cmp.Or(cmp.Compare(a.Rank, b.Rank), cmp.Compare(a.Start, b.Start), cmp.Compare(a.Kind, b.Kind),
			cmp.Compare(a.Seq, b.Seq), strings.Compare(a.Name, b.Name), strings.Compare(a.Label, b.Label))
	})
	b.WriteString("rank kind name start_ns dur_ns bytes peer seq step algo dtype root comm label value\n")
	for _, e := range evs {
		fmt.Fprintf(&b, "%d %s %s %d %d %d %d %d %d %q %q %d %s %q %g\n", e.Rank, e.Kind, e.Name, e.Start, e.Dur, e.Bytes, e.Peer,
			e.Seq, e.Step, e.Algo, e.DType, e.Root, e.Comm, e.Label, e.Value)
	}
	return b.String()
}

// TestGolden imports every fixture and compares the run, event by event,
// with testdata/golden; go test -update rewrites the golden files after a
// change that is meant.
func TestImportGolden(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opt   Options
		paths []string
	}{
		{"horovod_timeline", Options{}, []string{"testdata/horovod_timeline.json"}},
		{"horovod_old", Options{}, []string{"testdata/horovod_old.json"}},
		{"kineto_2ranks", Options{}, []string{"testdata/kineto_2ranks"}},
		{"kineto_old", Options{}, []string{"testdata/kineto_old.json"}},
		{"nccl_debug", Options{}, []string{"testdata/nccl_debug.log"}},
		{"nccl_debug_timestamps", Options{}, []string{"testdata/nccl_debug_timestamps.log"}},
		{"nccl_grouped", Options{}, []string{"testdata/nccl_grouped.log"}},
		{"inspector_2procs", Options{}, []string{"testdata/inspector_2procs"}},
		{"nccl_tests_all_gather", Options{}, []string{"testdata/nccl_tests_all_gather.txt"}},
		{"nccl_tests_2ranks", Options{Op: "allreduce"}, []string{"testdata/nccl_tests_2ranks.txt"}},
		{"nccl_tests_all_reduce_ring", Options{}, []string{"testdata/nccl_tests_all_reduce_ring.txt"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, run := importRun(t, tc.opt, tc.paths...)
			got := describe(res, run)
			path := filepath.Join("testdata", "golden", tc.name+".txt")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to write it)", err)
			}
			if got != string(want) {
				gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
				for i := range max(len(gl), len(wl)) {
					var g, w string
					if i < len(gl) {
						g = gl[i]
					}
					if i < len(wl) {
						w = wl[i]
					}
					if g != w {
						t.Fatalf("%s differs at line %d:\n got %s\nwant %s", path, i+1, g, w)
					}
				}
			}
		})
	}
}
