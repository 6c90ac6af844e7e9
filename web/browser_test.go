package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commprof/commprof/internal/webtest"
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
