package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commprof/commprof/internal/units"
	"github.com/commprof/commprof/internal/webtest"
	"github.com/commprof/commprof/load"
	"github.com/commprof/commprof/trace"
)

// reportDrawn is true once a report page has drawn every chart.
const reportDrawn = `window.commprofReport && window.commprofReport.ready && document.querySelectorAll('[data-drawn]').length === window.commprofReport.charts`

// The served pages work in a browser under the server's
// Content-Security-Policy: no errors, no requests leave the server, every
// chart is drawn, and no string from a trace runs as script.
func TestServePagesInBrowser(t *testing.T) {
	runs, _ := fixture(t)
	startRun(t, filepath.Join(runs, "recording-now"), 4, trace.Manifest{Name: "bs256 on 4 ranks"}, 10)
	ts := httptest.NewServer(newTestServer(t, Config{RunsDir: runs}))
	defer ts.Close()
	shots := webtest.ScreenshotDir(t)
	for _, tc := range []struct {
		name, path, wait string
		charts           bool
	}{
		{"index", "/", "", false},
		{"report", "/runs/beta/", reportDrawn, true},
		{"diff", "/diff?a=alpha&b=beta", reportDrawn, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shot := filepath.Join(shots, "serve-"+tc.name+".png")
			r := webtest.CheckPage(t, ts.URL+tc.path, webtest.Options{WaitFor: tc.wait, Screenshot: shot, HoverEvent: -1, Viewport: "1280x720",
				Eval: `window.commprofReport ? window.commprofReport.errors : []`})
			for _, p := range r.Problems() {
				t.Error(p)
			}
			if tc.charts && (r.Charts.Total == 0 || r.Charts.Drawn != r.Charts.Total) {
				t.Errorf("charts: %+v", r.Charts)
			}
			if string(r.Eval) != "[]" {
				t.Errorf("report errors: %s", r.Eval)
			}
			t.Logf("%s drawn in %.0f ms; screenshot %s", tc.path, r.DrawMs, shot)
		})
	}
}

// The live page follows the run: it fetches live.json, shows the events
// of batches appended after it loaded, and links to the report once the
// run has finished.
func TestServeLivePageInBrowser(t *testing.T) {
	runs := t.TempDir()
	startRun(t, filepath.Join(runs, "recording-now"), 4, trace.Manifest{Name: "bs256 on 4 ranks", Config: map[string]string{"batch_size": "256"}}, 10)
	rec := startRun(t, filepath.Join(runs, "live"), 4, trace.Manifest{Name: evilName}, 5)
	s := newTestServer(t, Config{RunsDir: runs, LiveInterval: 300 * time.Millisecond})
	// The run advances as the page asks: more batches at its first
	// fetch of live.json, the end at its second.
	var mu sync.Mutex
	polls := 0
	initial := rec.events()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/runs/live/live.json" {
			mu.Lock()
			polls++
			switch polls {
			case 1:
				rec.add(5)
			case 2:
				rec.finish(trace.StatusComplete)
			}
			mu.Unlock()
		}
		s.ServeHTTP(w, r)
	}))
	defer ts.Close()
	shots := webtest.ScreenshotDir(t)

	// A run that keeps recording: the page refreshes and stays live.
	shot := filepath.Join(shots, "serve-live.png")
	r := webtest.CheckPage(t, ts.URL+"/runs/recording-now/", webtest.Options{WaitFor: `window.commprofLive && window.commprofLive.polls >= 2`,
		Screenshot: shot, HoverEvent: -1, Viewport: "1280x720", Eval: `document.getElementById('done').hidden`})
	for _, p := range r.Problems() {
		t.Error(p)
	}
	if string(r.Eval) != "true" {
		t.Errorf("a running run shows as finished: %s", r.Eval)
	}
	t.Logf("screenshot %s", shot)

	// A run that advances, then ends.
	shot = filepath.Join(shots, "serve-live-done.png")
	r = webtest.CheckPage(t, ts.URL+"/runs/live/", webtest.Options{WaitFor: `window.commprofLive && window.commprofLive.done`,
		Screenshot: shot, HoverEvent: -1, Viewport: "1280x720",
		Eval: `({history: window.commprofLive.history, events: document.getElementById('events').textContent,
			link: document.getElementById('report-link').getAttribute('href'), shown: !document.getElementById('done').hidden,
			title: document.getElementById('title').textContent, doc: document.title, status: document.getElementById('status').textContent})`})
	for _, p := range r.Problems() {
		t.Error(p)
	}
	var got struct {
		History []int64
		Events  string
		Link    string
		Shown   bool
		Title   string
		Doc     string
		Status  string
	}
	if err := json.Unmarshal(r.Eval, &got); err != nil {
		t.Fatalf("eval: %v (%s)", err, r.Eval)
	}
	mu.Lock()
	final := rec.events()
	mu.Unlock()
	if len(got.History) < 2 || got.History[0] != initial || got.History[len(got.History)-1] != final || final <= initial {
		t.Errorf("events seen by the page: %v, want %d then %d", got.History, initial, final)
	}
	if got.Events != fmt.Sprintf("%d,%03d", final/1000, final%1000) && got.Events != fmt.Sprint(final) {
		t.Errorf("events shown: %q, want %d", got.Events, final)
	}
	if !got.Shown || got.Link != "./" || got.Status != trace.StatusComplete {
		t.Errorf("after the end: %+v", got)
	}
	// The run's name is text on the page, never markup.
	if got.Title != "live" || !strings.HasPrefix(got.Doc, evilName) {
		t.Errorf("title %q, document title %q", got.Title, got.Doc)
	}
	t.Logf("screenshot %s", shot)
}

// A served report holding only part of its run's events one by one
// fetches the events of a span it is zoomed into.
func TestServeReportFetchesDetail(t *testing.T) {
	runs, _ := fixture(t)
	ts := httptest.NewServer(newTestServer(t, Config{RunsDir: runs, ReportDetail: 50}))
	defer ts.Close()
	shot := filepath.Join(webtest.ScreenshotDir(t), "serve-detail.png")
	r := webtest.CheckPage(t, ts.URL+"/runs/beta/", webtest.Options{WaitFor: reportDrawn, Screenshot: shot, HoverEvent: -1, Viewport: "1280x900",
		Eval: `(async () => {
			const h = document.getElementById('timeline').commprofTimeline;
			const [, t1] = h.view();
			h.zoomTo(t1 * 0.80, t1 * 0.82);
			for (let i = 0; i < 100 && (h.detailLoads < 1 || h.loading); i++) await new Promise((ok) => setTimeout(ok, 100));
			h.redraw();
			return {loads: h.detailLoads, mode: h.mode, drawn: h.drawnEvents};
		})()`})
	for _, p := range r.Problems() {
		t.Error(p)
	}
	var got struct {
		Loads, Drawn int
		Mode         string
	}
	if err := json.Unmarshal(r.Eval, &got); err != nil {
		t.Fatalf("eval %s: %v", r.Eval, err)
	}
	if got.Loads != 1 || got.Mode != "events" || got.Drawn == 0 {
		t.Fatalf("after zooming in: %+v (screenshot %s)", got, shot)
	}
}

// The list in a browser: its configuration columns hold each run's
// figures, a column's name sorts by it, a sweep opens to its runs,
// ticking two runs fills the diff form whose URL draws their diff, and
// the sweep's link draws its page. Nothing is cut short at 1280 px.
func TestServeListInBrowser(t *testing.T) {
	runs, _ := sweepFixture(t)
	gone := startRun(t, filepath.Join(runs, "gone"), 2, trace.Manifest{Name: "train", Start: time.Now().Add(-30 * time.Minute),
		Config: map[string]string{"batch_size": "32", "lr_scaling": "linear", "warmup_epochs": "2"}}, 4)
	gone.abandon()
	ts := httptest.NewServer(newTestServer(t, Config{RunsDir: runs}))
	defer ts.Close()
	shots := webtest.ScreenshotDir(t)
	solo, err := load.Summary(context.Background(), filepath.Join(runs, "solo"))
	must(t, err)

	shot := filepath.Join(shots, "serve-list.png")
	r := webtest.CheckPage(t, ts.URL+"/", webtest.Options{WaitFor: "window.commprofIndex && window.commprofIndex.ready", Screenshot: shot,
		HoverEvent: -1, Viewport: "1280x800", Eval: `(() => {
		const idx = window.commprofIndex;
		const cell = (run, col) => { const td = document.querySelector('tr[data-run="' + run + '"] td[data-col="' + col + '"]'); return td ? td.textContent.trim() : null; };
		const row = (run) => Object.fromEntries(['batch', 'global', 'ranks', 'rule', 'sps', 'acc', 'status'].map(c => [c, cell(run, c)]));
		const out = {heads: [...document.querySelectorAll('#runs-table thead th')].map(th => th.textContent.trim()),
			solo: row('solo'), gone: row('gone'), bs: row('bs'), hiddenBefore: [...document.querySelectorAll('tr[data-sweep="bs"]')].filter(r => r.hidden).length};
		const top = () => idx.order().filter(n => !n.includes('/'));
		document.querySelector('th[data-col="batch"] button').click();
		out.desc = top();
		out.descKids = idx.order().filter(n => n.startsWith('bs/'));
		document.querySelector('th[data-col="batch"] button').click();
		out.asc = top();
		out.ariaSort = document.querySelector('th[data-col="batch"]').getAttribute('aria-sort');
		document.querySelector('button.cp-toggle[data-sweep="bs"]').click();
		out.shown = [...document.querySelectorAll('tr[data-sweep="bs"]')].filter(r => !r.hidden).length;
		const tick = (id) => { const b = document.querySelector('input.cp-pick[value="' + id + '"]'); b.checked = true; b.dispatchEvent(new Event('change')); };
		tick('solo'); tick('bs/r2-bs64-lrnone-wu0'); tick('bs/r2-bs256-lrnone-wu0');
		out.picks = idx.picks();
		out.marked = [...document.querySelectorAll('tr[data-pick]')].map(r => r.getAttribute('data-run') + '=' + r.getAttribute('data-pick'));
		const form = document.querySelector('form.cp-diff-form');
		out.diff = new URL(form.getAttribute('action') + '?' + new URLSearchParams(new FormData(form)), location.href).href;
		out.sweep = document.querySelector('tr[data-run="bs"] a.cp-runname').href;
		const wrap = document.querySelector('.cp-table-wrap');
		out.overflow = wrap.scrollWidth - wrap.clientWidth;
		out.clipped = ` + webtest.ClippedJS + `;
		return out;
	})()`})
	for _, p := range r.Problems() {
		t.Error(p)
	}
	var got struct {
		Heads               []string
		Solo, Gone, Bs      map[string]string
		HiddenBefore, Shown int
		Desc, DescKids, Asc []string
		AriaSort            string
		Picks, Marked       []string
		Diff, Sweep         string
		Overflow            int
		Clipped             []string
	}
	if err := json.Unmarshal(r.Eval, &got); err != nil {
		t.Fatalf("eval: %v (%s)", err, r.Eval)
	}
	t.Logf("screenshot %s", shot)
	want := []string{"A/B", "run", "status", "batch", "global batch", "ranks", "LR rule", "samples/s", "accuracy", "step time", "comm.", "bus bw", "events", "started"}
	if strings.Join(got.Heads, "|") != strings.Join(want, "|") {
		t.Errorf("columns %q", got.Heads)
	}
	wantSolo := map[string]string{"batch": "128", "global": fmt.Sprint(solo.Run.SamplesPerStep), "ranks": "4", "rule": "sqrt",
		"sps": fmt.Sprintf("%.0f", solo.StepSummary.SamplesPerSec), "acc": units.Percent(solo.Run.Metrics["test_accuracy"], 2), "status": "complete"}
	if fmt.Sprint(got.Solo) != fmt.Sprint(wantSolo) {
		t.Errorf("solo's row %v, want %v", got.Solo, wantSolo)
	}
	if got.Gone["status"] != "abandoned" || got.Gone["rule"] != "linear, warm-up 2" || got.Gone["batch"] != "32" || got.Gone["global"] != "64" {
		t.Errorf("the abandoned run's row %v", got.Gone)
	}
	if got.Bs["batch"] != "64–256" || got.Bs["global"] != "128–512" || got.Bs["acc"] != "60–90%" || got.Bs["rule"] != "none; linear, warm-up 1" {
		t.Errorf("the sweep's row %v", got.Bs)
	}
	// By batch, largest first, then smallest first; entries without one
	// (the sweeps whose sweep.json cannot be read) last either way.
	if strings.Join(got.Desc, " ") != "solo bs gone bs-broken bs-recording" && strings.Join(got.Desc, " ") != "solo bs gone bs-recording bs-broken" ||
		got.Asc[0] != "gone" || got.Asc[1] != "bs" || got.Asc[2] != "solo" || got.AriaSort != "ascending" {
		t.Errorf("sorted by batch: %v, then %v (%s)", got.Desc, got.Asc, got.AriaSort)
	}
	if len(got.DescKids) != 3 || !strings.Contains(got.DescKids[2], "bs64") {
		t.Errorf("the sweep's runs by batch, largest first: %v", got.DescKids)
	}
	if got.HiddenBefore != 3 || got.Shown != 3 {
		t.Errorf("the sweep's runs: %d hidden, then %d shown", got.HiddenBefore, got.Shown)
	}
	// A third tick replaces the first: A and B are the last two.
	if strings.Join(got.Picks, " ") != "bs/r2-bs64-lrnone-wu0 bs/r2-bs256-lrnone-wu0" || len(got.Marked) != 2 {
		t.Errorf("picks %v, marked %v", got.Picks, got.Marked)
	}
	if !strings.HasSuffix(got.Diff, "/diff?a=bs%2Fr2-bs64-lrnone-wu0&b=bs%2Fr2-bs256-lrnone-wu0") {
		t.Errorf("the diff's URL %s", got.Diff)
	}
	if got.Overflow > 0 || len(got.Clipped) > 0 {
		t.Errorf("at 1280 px the table overflows by %d px; cut short: %v", got.Overflow, got.Clipped)
	}

	// The picked diff and the sweep's page draw.
	for _, tc := range []struct{ name, url, kind string }{{"serve-picked-diff", got.Diff, "diff"}, {"serve-sweep", got.Sweep, "sweep"}} {
		shot := filepath.Join(shots, tc.name+".png")
		r := webtest.CheckPage(t, tc.url, webtest.Options{WaitFor: reportDrawn, Screenshot: shot, HoverEvent: -1, Viewport: "1280x800",
			Eval: `({kind: document.querySelector('main').dataset.kind, title: document.querySelector('h1').textContent, clipped: ` + webtest.ClippedJS + `})`})
		for _, p := range r.Problems() {
			t.Errorf("%s: %s", tc.name, p)
		}
		var page struct {
			Kind, Title string
			Clipped     []string
		}
		if err := json.Unmarshal(r.Eval, &page); err != nil {
			t.Fatalf("eval: %v (%s)", err, r.Eval)
		}
		if page.Kind != tc.kind || r.Charts.Total == 0 || r.Charts.Drawn != r.Charts.Total {
			t.Errorf("%s: a %q page, charts %+v", tc.url, page.Kind, r.Charts)
		}
		if len(page.Clipped) > 0 {
			t.Errorf("%s: cut short at 1280 px: %v", tc.name, page.Clipped)
		}
		t.Logf("%s: %q; screenshot %s", tc.url, page.Title, shot)
	}
}
