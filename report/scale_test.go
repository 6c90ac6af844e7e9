package report

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/envnames"
	"github.com/commprof/commprof/internal/synthrun"
	"github.com/commprof/commprof/load"
)

// chartAxes returns a variant's x and y category labels and its series'
// names.
func chartAxes(t *testing.T, v chartVariant) (x, y, series []string) {
	t.Helper()
	var o struct {
		X []struct {
			Data []string `json:"data"`
		} `json:"xAxis"`
		Y []struct {
			Data []string `json:"data"`
		} `json:"yAxis"`
		Series []struct {
			Name string `json:"name"`
			Data []struct {
				Value json.RawMessage `json:"value"`
			} `json:"data"`
		} `json:"series"`
	}
	if err := json.Unmarshal(v.Option, &o); err != nil {
		t.Fatalf("%s: %v", v.Label, err)
	}
	if len(o.X) > 0 {
		x = o.X[0].Data
	}
	if len(o.Y) > 0 {
		y = o.Y[0].Data
	}
	for _, s := range o.Series {
		series = append(series, s.Name)
	}
	return x, y, series
}

// heatmapSum sums a heatmap variant's cell values.
func heatmapSum(t *testing.T, v chartVariant) float64 {
	t.Helper()
	var o struct {
		Series []struct {
			Data []struct {
				Value [3]float64 `json:"value"`
			} `json:"data"`
		} `json:"series"`
	}
	if err := json.Unmarshal(v.Option, &o); err != nil {
		t.Fatalf("%s: %v", v.Label, err)
	}
	var sum float64
	for _, s := range o.Series {
		for _, d := range s.Data {
			sum += d.Value[2]
		}
	}
	return sum
}

// TestManyRanks draws synthetic runs of 512 and 1,024 ranks (4,096 with
// COMMPROF_SCALE_4096=1: it takes gigabytes) whose ranks 17 and 300 are
// held back before every allreduce: the page stays small and says the run
// is synthetic, no chart has a bar, row or lane per rank, the held-back
// ranks are shown on their own, and the traffic summed by host is every
// byte the generator sent.
func TestManyRanks(t *testing.T) {
	sizes := []int{512, 1024}
	if os.Getenv(envnames.Scale4096) != "" {
		sizes = append(sizes, 4096)
	}
	for _, n := range sizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			o := synthrun.Options{Ranks: n, Steps: 6, Late: map[int]int64{17: 3_000_000, 300: 3_000_000}}
			if err := synthrun.Write(dir, o); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			run, err := load.Load(ctx, dir, TimelineKeep(64<<20))
			if err != nil {
				t.Fatal(err)
			}
			s := run.Summary
			tl, err := BuildTimeline(ctx, run, TimelineOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var page bytes.Buffer
			if err := WriteHTML(&page, s, tl, Options{}); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d ranks: a page of %.1f MB", n, float64(page.Len())/1e6)
			if page.Len() > 10<<20 {
				t.Errorf("the page is %d bytes, over 10 MiB", page.Len())
			}
			if !strings.Contains(page.String(), "synthetic runs: it is not a measured run") {
				t.Error("the page does not say the run is synthetic")
			}
			late := []string{"rank 17 (", "rank 300 ("}

			x, _, _ := chartAxes(t, rankChart(s).Variants[0])
			if len(x) > 9 || !strings.HasPrefix(x[0], "min") || !strings.HasPrefix(x[3], "max") {
				t.Errorf("rank chart bars: %v", x)
			}
			for _, r := range []string{"rank 17", "rank 300"} {
				// Its own bar, or a percentile's bar that says why too.
				if !slices.ContainsFunc(x, func(b string) bool {
					return strings.HasPrefix(b, r+"\n(") || strings.Contains(b, "\n"+r+"\n")
				}) {
					t.Errorf("rank chart: no bar for %s that says why it stands out: %v", r, x)
				}
			}

			skew, ok := skewChart(s)
			if !ok {
				t.Fatal("no skew chart")
			}
			_, _, series := chartAxes(t, skew.Variants[0])
			for _, l := range late {
				if !slices.ContainsFunc(series, func(b string) bool { return strings.HasPrefix(b, l) }) {
					t.Errorf("skew chart: no line of its own for %s: %v", l, series)
				}
			}

			// Every byte the generator sent: each rank one message per
			// recursive-doubling round of every allreduce.
			rounds := 0
			for 1<<rounds < n {
				rounds++
			}
			sent := float64(n * rounds * o.Steps * 2 * (4 << 20))
			m := matrixChart(s)
			drill := 0
			for _, v := range m.Variants {
				x, y, _ := chartAxes(t, v)
				if len(x) > manyRanks || len(y) > manyRanks {
					t.Errorf("%s: a heatmap of %d x %d", v.Label, len(y), len(x))
				}
				if v.Label == "bytes by host, every op" {
					if got := heatmapSum(t, v); got != sent {
						t.Errorf("%s: %.0f bytes in all, the generator sent %.0f", v.Label, got, sent)
					}
				}
				if strings.HasPrefix(v.Label, "bytes, ranks of ") {
					drill++
					if len(x) != 8 || !strings.HasPrefix(x[0], "rank ") {
						t.Errorf("%s: columns %v, want the %d ranks of a host", v.Label, x, 8)
					}
				}
			}
			if drill != drillPairs {
				t.Errorf("%d drill-down heatmaps, want %d", drill, drillPairs)
			}

			if len(tl.Ranks) > 9 || !slices.Contains(tl.Ranks, 17) || !slices.Contains(tl.Ranks, 300) {
				t.Errorf("timeline lanes of ranks %v", tl.Ranks)
			}

			// A diff of the run with itself: host heatmaps, B − A empty.
			dm := diffMatrixChart(s, s, analyze.Compare(s, s))
			if len(dm.Variants) != 3 || heatmapSum(t, dm.Variants[0]) != 0 {
				t.Errorf("diff heatmaps: %d variants, B − A sums to %v", len(dm.Variants), heatmapSum(t, dm.Variants[0]))
			}
			for _, v := range dm.Variants {
				if x, y, _ := chartAxes(t, v); len(x) > manyRanks || len(y) > manyRanks || len(x) == 0 {
					t.Errorf("diff %s: a heatmap of %d x %d", v.Label, len(y), len(x))
				}
			}
			var diffPage bytes.Buffer
			if err := WriteDiffHTML(&diffPage, s, s, analyze.Compare(s, s)); err != nil {
				t.Fatal(err)
			}
			if diffPage.Len() > 10<<20 {
				t.Errorf("the diff page is %d bytes, over 10 MiB", diffPage.Len())
			}

			// The rank table: the latest ranks first, at most tableTopK,
			// and the note's sums with the rows shown are the whole run.
			rt := pageView(s, "rank", tableLimit(s, "rank", 500))
			if len(rt.Rows) != tableTopK {
				t.Fatalf("the rank table has %d rows, want %d", len(rt.Rows), tableTopK)
			}
			if first := []string{rt.Keys[0][0], rt.Keys[1][0]}; !slices.Contains(first, "17") || !slices.Contains(first, "300") {
				t.Errorf("the rank table starts with ranks %v, want the held-back 17 and 300", first)
			}
			var shown, rest int64
			for _, row := range rt.Keys {
				v, _ := strconv.ParseInt(row[rt.columnIndex("events")], 10, 64)
				shown += v
			}
			if _, err := fmt.Sscanf(rt.Note[strings.Index(rt.Note, "together: events ")+len("together: events "):], "%d", &rest); err != nil {
				t.Fatalf("the note: %q: %v", rt.Note, err)
			}
			if shown+rest != s.Run.Events {
				t.Errorf("%d events in the rows shown and %d in the rest, the run has %d", shown, rest, s.Run.Events)
			}
		})
	}
}
