package report

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/importers"
	"github.com/commprof/commprof/internal/units"
	"github.com/commprof/commprof/internal/webtest"
	"github.com/commprof/commprof/load"
)

const (
	horovodFixture = "../importers/testdata/horovod_timeline.json"
	horovodReal    = "../../shared/data/horovod/atpesc_tf2_keras_cpu_8ranks.json"
)

// importedReport imports a trace and writes its report with its
// timeline, as commprof report does; it returns the page's path and the
// summary.
func importedReport(t *testing.T, path string) (string, *analyze.Summary) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run")
	if _, err := importers.Import(context.Background(), []string{path}, importers.Options{Out: dir}); err != nil {
		t.Fatal(err)
	}
	run, err := load.Load(context.Background(), dir, TimelineKeep(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	tl, err := BuildTimeline(context.Background(), run, TimelineOptions{Detail: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	s := run.Summary
	var buf bytes.Buffer
	if err := WriteHTML(&buf, s, tl, Options{}); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(t.TempDir(), "report.html")
	if err := os.WriteFile(page, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return page, s
}

// tickedCall is one negotiation of a Horovod timeline with every rank's
// tick, as the test reads it from the file itself.
type tickedCall struct {
	tensor string
	ticks  map[int]int64 // rank -> µs
}

// horovodTicks reads a timeline's negotiations and their ticks: per
// tensor ("process"), the X events named by a rank between a
// NEGOTIATE_* begin and its end.
func horovodTicks(t *testing.T, path string) []tickedCall {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var evs []struct {
		Name string         `json:"name"`
		Ph   string         `json:"ph"`
		TS   int64          `json:"ts"`
		PID  int            `json:"pid"`
		Args map[string]any `json:"args"`
	}
	if err := json.Unmarshal(b, &evs); err != nil {
		t.Fatal(err)
	}
	names := map[int]string{}
	open := map[int]*tickedCall{} // negotiation in progress, by pid
	depth := map[int]int{}        // B/E nesting, by pid
	var out []tickedCall
	for _, e := range evs {
		switch {
		case e.Ph == "M" && e.Name == "process_name":
			if n, ok := e.Args["name"].(string); ok {
				names[e.PID] = n
			}
		case e.Ph == "B":
			depth[e.PID]++
			if strings.HasPrefix(e.Name, "NEGOTIATE_") && depth[e.PID] == 1 {
				open[e.PID] = &tickedCall{tensor: names[e.PID], ticks: map[int]int64{}}
			}
		case e.Ph == "E":
			depth[e.PID]--
			if c := open[e.PID]; c != nil && depth[e.PID] == 0 {
				if len(c.ticks) > 1 {
					out = append(out, *c)
				}
				delete(open, e.PID)
			}
		case e.Ph == "X":
			if r, err := strconv.Atoi(e.Name); err == nil && open[e.PID] != nil {
				open[e.PID].ticks[r] = e.TS
			}
		}
	}
	return out
}

// TestWaitingSection: the report of an imported Horovod timeline says,
// per tensor, how far apart the ranks became ready, the wait that cost
// and who came last by how much, as the timeline's ticks give them; and
// the straggler card and the section name the same rank as last to
// arrive most often.
func TestWaitingSection(t *testing.T) {
	if strings.Contains(strings.ToLower(waitingJS), "</script") {
		t.Fatal("waiting.js contains </script and cannot be inlined")
	}
	page, s := importedReport(t, horovodFixture)
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)

	// What the ticks say, per tensor (each has one ticked call here).
	type want struct {
		tensor               string
		skew, wait, lateNext int64 // ns
		last                 int
	}
	var ws []want
	lastCount := map[int]int{}
	for _, c := range horovodTicks(t, horovodFixture) {
		w := want{tensor: c.tensor, last: -1}
		var times []int64
		for r, ts := range c.ticks {
			times = append(times, ts)
			if w.last < 0 || ts > c.ticks[w.last] {
				w.last = r
			}
		}
		slices.Sort(times)
		first, last := times[0], times[len(times)-1]
		w.skew, w.lateNext = 1000*(last-first), 1000*(last-times[len(times)-2])
		for _, ts := range times {
			w.wait += 1000 * (last - ts)
		}
		lastCount[w.last]++
		ws = append(ws, w)
	}
	if len(ws) != 4 {
		t.Fatalf("the fixture has %d ticked negotiations, want 4", len(ws))
	}
	// The costliest first.
	slices.SortStableFunc(ws, func(a, b want) int { return cmp.Or(cmp.Compare(b.wait, a.wait), strings.Compare(a.tensor, b.tensor)) })

	sec := regexp.MustCompile(`(?s)<section class="cp-section" id="waiting">.*?</section>`).FindString(doc)
	if sec == "" {
		t.Fatal("no waiting section on the page")
	}
	if !strings.Contains(doc, `<a href="#waiting">Who kept the others waiting</a>`) {
		t.Error("the page's navigation does not link the waiting section")
	}
	rows := tableRows(sec)
	if len(rows) != len(ws) {
		t.Fatalf("%d rows in the waiting table, want %d:\n%v", len(rows), len(ws), rows)
	}
	for i, w := range ws {
		got := rows[i]
		wantRow := []string{w.tensor, "", "1", units.Duration(float64(w.skew)), units.Duration(float64(w.skew)), units.Duration(float64(w.wait)),
			fmt.Sprintf("rank %d (1, +%s)", w.last, units.Duration(float64(w.lateNext)))}
		if len(got) != len(wantRow) {
			t.Fatalf("row %d: %v", i, got)
		}
		for j, cell := range wantRow {
			if j != 1 && got[j] != cell {
				t.Errorf("row %d (%s), column %d: %q, want %q", i, w.tensor, j, got[j], cell)
			}
		}
	}

	// The rank last most often, in the section and on the card, alike.
	most := -1
	for r, n := range lastCount {
		if most < 0 || n > lastCount[most] || n == lastCount[most] && r < most {
			most = r
		}
	}
	phrase := fmt.Sprintf("Last to arrive most often: rank %d, in %d of the run&#39;s %d multi-rank calls", most, lastCount[most], len(ws))
	if !strings.Contains(sec, phrase) {
		t.Errorf("the section's intro does not say %q:\n%s", phrase, sec[:min(len(sec), 1500)])
	}
	card := regexp.MustCompile(`(?s)<a href="#def-straggler"[^>]*>straggler</a></div><div class="cp-card-value">([^<]*)</div><div class="cp-card-note">([^<]*)</div>`).FindStringSubmatch(doc)
	if card == nil {
		t.Fatal("no straggler card")
	}
	if s.Headline.Straggler < 0 && card[1] != "none stands out" {
		t.Errorf("straggler card %q with no straggler named", card[1])
	}
	if c := fmt.Sprintf("last to arrive most often: rank %d (%d of %d calls)", most, lastCount[most], len(ws)); !strings.Contains(html.UnescapeString(card[2]), c) {
		t.Errorf("straggler card %q: want it to say %q", card[2], c)
	}
	if !strings.Contains(html.UnescapeString(card[2]), "by cost") || !strings.Contains(sec, "Arriving last is not the same as costing time") {
		t.Errorf("the card (%q) and the section do not say they measure different things", card[2])
	}

	// The skew heatmap's tooltip names each call's tensor.
	for _, w := range ws {
		if q := strconv.Quote(w.tensor + " · "); !strings.Contains(doc, q[:len(q)-1]) {
			t.Errorf("the skew heatmap does not name %s", w.tensor)
		}
	}
}

// tableRows returns the cells of a section's first table, row by row, as
// text.
func tableRows(sec string) [][]string {
	body := regexp.MustCompile(`(?s)<tbody>(.*?)</tbody>`).FindStringSubmatch(sec)
	if body == nil {
		return nil
	}
	var out [][]string
	for _, tr := range regexp.MustCompile(`(?s)<tr[^>]*>(.*?)</tr>`).FindAllStringSubmatch(body[1], -1) {
		var row []string
		for _, td := range regexp.MustCompile(`(?s)<td[^>]*>(.*?)</td>`).FindAllStringSubmatch(tr[1], -1) {
			row = append(row, html.UnescapeString(td[1]))
		}
		out = append(out, row)
	}
	return out
}

// TestWaitingSectionInBrowser: the section draws in Chromium without an
// error, its chart's and the skew heatmap's tooltips name the tensor, and
// a long table shows its costliest rows with a button for the rest.
func TestWaitingSectionInBrowser(t *testing.T) {
	shots := webtest.ScreenshotDir(t)
	for _, tc := range []struct{ name, path string }{{"fixture", horovodFixture}, {"real", horovodReal}} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := os.Stat(tc.path); err != nil {
				t.Skipf("%s is not here: %v", tc.path, err)
			}
			page, s := importedReport(t, tc.path)
			shot := filepath.Join(shots, "waiting-"+tc.name+".png")
			ls := s.Skew.LabelSeries
			r := webtest.CheckPage(t, page, webtest.Options{Screenshot: shot, HoverEvent: -1, Viewport: "1280x1000",
				WaitFor: `window.commprofReport && window.commprofReport.ready && document.querySelectorAll('[data-chart][data-drawn]').length === window.commprofReport.charts`,
				Eval: fmt.Sprintf(`(() => {
					const sec = document.getElementById('waiting');
					sec.scrollIntoView();
					const tip = id => echarts.getInstanceByDom(document.getElementById(id)).getOption().tooltip[0].formatter;
					const rows = sec.querySelectorAll('tbody tr');
					return {
						rows: rows.length,
						shown: Array.prototype.filter.call(rows, tr => tr.offsetParent !== null).length,
						button: (sec.querySelector('.cp-more-rows') || {}).textContent || '',
						waiting: tip('chart-waiting')({value: [%d, %d, 0], seriesName: 'rank %d'}),
						heatmap: tip('chart-skew')({value: [0, 0, 5]}),
						clipped: %s,
					};
				})()`, ls.AtNS[0]-s.Run.FirstNS, ls.SkewNS[0], ls.Last[0], webtest.ClippedJS),
			})
			for _, p := range r.Problems() {
				t.Error(p)
			}
			var got struct {
				Rows, Shown      int
				Button           string
				Waiting, Heatmap string
				Clipped          []string
			}
			if err := json.Unmarshal(r.Eval, &got); err != nil {
				t.Fatalf("eval %s: %v", r.Eval, err)
			}
			if got.Rows != len(s.Skew.ByLabel) {
				t.Errorf("%d rows in the table, want %d", got.Rows, len(s.Skew.ByLabel))
			}
			// Collapsed as the page's other long tables are.
			if long := got.Rows > collapseAbove; long && (got.Shown != collapsedRows || !strings.Contains(got.Button, strconv.Itoa(got.Rows))) ||
				!long && got.Shown != got.Rows {
				t.Errorf("%d of %d rows shown, button %q", got.Shown, got.Rows, got.Button)
			}
			// The first labelled call's point: its tensor, when, its skew,
			// its last rank.
			for _, want := range []string{ls.Label[0], "the last rank arrived", fmt.Sprintf("last: rank %d", ls.Last[0])} {
				if !strings.Contains(html.UnescapeString(got.Waiting), want) {
					t.Errorf("the chart's tooltip %q does not say %q", got.Waiting, want)
				}
			}
			if sr := s.Skew.Series; len(sr.Label) > 0 && sr.Label[0] != "" && !strings.Contains(html.UnescapeString(got.Heatmap), sr.Label[0]) {
				t.Errorf("the skew heatmap's tooltip %q does not name the tensor %q", got.Heatmap, sr.Label[0])
			}
			for _, c := range got.Clipped {
				t.Errorf("clipped: %s", c)
			}
			checkScreenshot(t, shot)
		})
	}
}
