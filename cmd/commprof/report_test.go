package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/units"
	"github.com/commprof/commprof/internal/webtest"
	"github.com/commprof/commprof/report"
	"github.com/commprof/commprof/trace"
)

// drawn is true once report.js has drawn every chart.
const drawn = `window.commprofReport && window.commprofReport.ready && document.querySelectorAll('[data-drawn]').length === window.commprofReport.charts`

// timelineOf reads the timeline data a report page carries.
func timelineOf(t *testing.T, page string) *report.Timeline {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)<script type="application/json" id="timeline-data">(.*?)</script>`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s has no timeline data", page)
	}
	var td report.Timeline
	if err := json.Unmarshal(m[1], &td); err != nil {
		t.Fatal(err)
	}
	return &td
}

func recordTrain(t *testing.T, dir string, batch string) {
	t.Helper()
	r := commprof(t, nil, "record", "--ranks", "3", "--out", dir, "--", "train", "--synthetic-size", "3000", "--hidden", "64",
		"--epochs", "1", "--batch-size", batch)
	if r.code != 0 {
		t.Fatalf("record: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func TestReportInBrowser(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	recordTrain(t, dir, "32")
	page := filepath.Join(t.TempDir(), "report.html")
	r := commprof(t, nil, "report", dir, "-o", page)
	if r.code != 0 || !strings.Contains(r.stdout, "wrote "+page) {
		t.Fatalf("report: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "second time") {
		t.Fatalf("a small run was read twice:\n%s", r.stdout)
	}
	// With no memory for the timeline's events, report reads the run
	// again for them, says so, and writes the same page.
	again := filepath.Join(t.TempDir(), "again.html")
	if r := commprof(t, nil, "report", dir, "-o", again, "--timeline-memory", "0"); r.code != 0 || !strings.Contains(r.stdout, "read a second time") {
		t.Fatalf("report --timeline-memory 0: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if a, b := readFile(t, page), readFile(t, again); a != b {
		t.Fatal("the page of a run read twice differs from the page of the run read once")
	}
	td := timelineOf(t, page)
	// Hover the first message received from another rank.
	hover, peer, bytes := -1, int32(-1), int64(0)
	for i, lane := range td.Events.Lane {
		if td.Lanes[lane] == "recv" && td.Events.Bytes[i] >= 4096 && td.Events.Dur[i] > 0 {
			hover, peer, bytes = i, td.Events.Peer[i], td.Events.Bytes[i]
			break
		}
	}
	if hover < 0 || td.Truncated != 0 || len(td.Links) == 0 {
		t.Fatalf("timeline: hover %d, truncated %d, %d links", hover, td.Truncated, len(td.Links))
	}
	shot := filepath.Join(webtest.ScreenshotDir(t), "report.png")
	res := webtest.CheckPage(t, page, webtest.Options{Screenshot: shot, FullPage: true, HoverEvent: hover, WaitFor: drawn,
		Eval: "window.commprofReport", Viewport: "1400x900"})
	t.Logf("screenshot %s; load %.0f ms, drawn %.0f ms", shot, res.LoadMs, res.DrawMs)
	if p := res.Problems(); len(p) > 0 {
		t.Fatalf("the report has problems: %q", p)
	}
	// The run report draws: ranks, steps, matrix, op x size, sizes, skew,
	// busbw, projection and one pattern graph at least.
	if res.Charts.Total < 9 || res.Charts.Drawn != res.Charts.Total {
		t.Fatalf("charts: %+v", res.Charts)
	}
	var st struct {
		Charts, Drawn int
		Errors        []string
	}
	if err := json.Unmarshal(res.Eval, &st); err != nil || st.Drawn != st.Charts || len(st.Errors) != 0 {
		t.Fatalf("report state %s: %v", res.Eval, err)
	}
	if !strings.Contains(res.Tooltip, fmt.Sprintf("peer: rank %d", peer)) || !strings.Contains(res.Tooltip, fmt.Sprintf("(%s B)", commas(bytes))) {
		t.Fatalf("hovering recv event %d (from rank %d, %d bytes) shows %q", hover, peer, bytes, res.Tooltip)
	}
	if st, err := os.Stat(shot); err != nil || st.Size() < 50_000 {
		t.Fatalf("screenshot: %v", err)
	}
	checkFitsAndTables(t, page, true)
}

// tablesJS opens the steps table (collapsed to its slowest rows), then
// sorts it by step twice, and says what the reader saw; with what is
// clipped at the window's width.
const tablesJS = `(() => {
  const clipped = %s;
  const t = [...document.querySelectorAll('#tables table')].find(t => t.tHead.rows[0].cells[0].textContent === 'step');
  if (!t) return {clipped};
  const rows = () => [...t.tBodies[0].rows];
  const visible = () => rows().filter(r => r.offsetParent !== null).length;
  const shown = visible(), firstTimes = rows().slice(0, 3).map(r => Number(r.cells[2].getAttribute('data-v')));
  const button = t.parentNode.nextElementSibling;
  const label = button ? button.textContent : '';
  if (button) button.click();
  const all = visible();
  const th = t.tHead.rows[0].cells[0];
  th.click();
  const desc = rows()[0].cells[0].textContent;
  th.click();
  const asc = rows()[0].cells[0].textContent;
  return {clipped, shown, label, all, rows: rows().length, desc, asc, firstTimes, maxTime: Math.max(...rows().map(r => Number(r.cells[2].getAttribute('data-v'))))};
})()`

// checkFitsAndTables opens a run report at 1280 px: nothing clipped, the
// steps table collapsed to its slowest rows, opened and sorted on click.
func checkFitsAndTables(t *testing.T, page string, steps bool) {
	t.Helper()
	res := webtest.CheckPage(t, page, webtest.Options{WaitFor: drawn, Viewport: "1280x800", Eval: fmt.Sprintf(tablesJS, webtest.ClippedJS)})
	var got struct {
		Clipped          []string
		Shown, All, Rows int
		Label, Desc, Asc string
		FirstTimes       []float64
		MaxTime          float64
	}
	if err := json.Unmarshal(res.Eval, &got); err != nil {
		t.Fatalf("%s: %v (%s)", res.Eval, err, res.EvalError)
	}
	if len(got.Clipped) > 0 {
		t.Errorf("at 1280 px the report draws outside its boxes: %q", got.Clipped)
	}
	if !steps {
		return
	}
	if got.Rows <= 15 || got.Shown != 10 || got.Label != fmt.Sprintf("Show all %d rows", got.Rows) || got.All != got.Rows {
		t.Errorf("steps table: %d rows, %d shown, button %q, %d shown after it", got.Rows, got.Shown, got.Label, got.All)
	}
	if len(got.FirstTimes) != 3 || got.FirstTimes[0] != got.MaxTime || got.FirstTimes[1] > got.FirstTimes[0] || got.FirstTimes[2] > got.FirstTimes[1] {
		t.Errorf("the steps table does not open with the slowest: %v (slowest %v)", got.FirstTimes, got.MaxTime)
	}
	if got.Desc != fmt.Sprint(got.Rows-1) || got.Asc != "0" {
		t.Errorf("sorting by step: %q then %q, want %d then 0", got.Desc, got.Asc, got.Rows-1)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func commas(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func TestDiffReportInBrowser(t *testing.T) {
	base := t.TempDir()
	a, b := filepath.Join(base, "bs16"), filepath.Join(base, "bs64")
	recordTrain(t, a, "16")
	recordTrain(t, b, "64")
	page := filepath.Join(base, "diff.html")
	r := commprof(t, nil, "diff", a, b, "--html", page, "--limit", "0")
	if r.code != 0 || !strings.Contains(r.stdout, `configuration: batch_size "16" -> "64"`) || !strings.Contains(r.stdout, "time per sample") {
		t.Fatalf("diff: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	shot := filepath.Join(webtest.ScreenshotDir(t), "diff.png")
	res := webtest.CheckPage(t, page, webtest.Options{Screenshot: shot, FullPage: true, HoverEvent: -1, WaitFor: drawn, Viewport: "1280x800",
		Eval: `({rows: document.querySelectorAll('#changes table.cp-table tbody tr').length,
			title: document.getElementById('title').textContent,
			cards: [...document.querySelectorAll('.cp-card')].map(c => [c.querySelector('.cp-card-label').textContent, c.querySelector('.cp-card-value').textContent, c.getAttribute('data-tone') || '']),
			outcomes: [...document.querySelectorAll('#outcomes tbody tr')].map(r => r.cells[0].textContent),
			firstSection: document.querySelector('.cp-section').id,
			clipped: ` + webtest.ClippedJS + `})`})
	t.Logf("screenshot %s", shot)
	if p := res.Problems(); len(p) > 0 {
		t.Fatalf("the diff report has problems: %q", p)
	}
	var got struct {
		Rows         int
		Title        string
		Cards        [][3]string
		Outcomes     []string
		FirstSection string
		Clipped      []string
	}
	if err := json.Unmarshal(res.Eval, &got); err != nil || got.Rows < 20 || res.Charts.Total < 4 || res.Charts.Drawn != res.Charts.Total {
		t.Fatalf("diff page: %s (%v), charts %+v", res.Eval, err, res.Charts)
	}
	// The page is titled by what differs and leads with the outcomes.
	if got.Title != "batch 16 → 64" || got.FirstSection != "outcomes" || len(got.Outcomes) < 5 || got.Outcomes[0] != "throughput" {
		t.Errorf("title %q, first section %q, outcomes %q", got.Title, got.FirstSection, got.Outcomes)
	}
	// Its cards are the outcomes, coloured by the diff's verdicts.
	var d analyze.Diff
	if r := commprof(t, nil, "diff", a, b, "--format", "json"); json.Unmarshal([]byte(r.stdout), &d) != nil || len(d.Outcomes) != len(got.Cards) {
		t.Fatalf("%d outcomes in the diff, %d cards: %q", len(d.Outcomes), len(got.Cards), got.Cards)
	}
	for i, c := range d.Outcomes {
		tone := map[string]string{"better": "good", "worse": "bad"}[c.Verdict]
		if got.Cards[i][0] != c.Metric || got.Cards[i][1] != report.FormatValue(c.B, c.Unit) || got.Cards[i][2] != tone {
			t.Errorf("card %d: %q, outcome %+v", i, got.Cards[i], c)
		}
	}
	if len(got.Clipped) > 0 {
		t.Errorf("at 1280 px the diff draws outside its boxes: %q", got.Clipped)
	}
}

// Names from a trace are text on the page, wherever they appear.
func TestReportEscapesTraceStrings(t *testing.T) {
	const evil = `<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">`
	dir := t.TempDir()
	m := &trace.Manifest{FormatVersion: trace.FormatVersion, Name: "run " + evil, WorldSize: 2, Status: trace.StatusComplete,
		Config: map[string]string{"model": evil}, Metrics: map[string]float64{}}
	for r := range 2 {
		peer := int32(1 - r)
		evs := []trace.Event{
			{Rank: int32(r), Kind: trace.KindStep, Name: "step", Start: 0, Dur: 1000, Peer: -1, Seq: -1, Step: 0, Root: -1, Chunk: -1},
			{Rank: int32(r), Kind: trace.KindCompute, Name: evil, Start: 0, Dur: 400, Peer: -1, Seq: -1, Step: 0, Root: -1, Chunk: -1},
			{Rank: int32(r), Kind: trace.KindCollective, Name: evil, Start: 500, Dur: 300, Bytes: 4096, Peer: -1, Seq: 0, Step: 0, Algo: evil, DType: "float32", Root: -1, Chunk: -1, Comm: evil},
			{Rank: int32(r), Kind: trace.KindSend, Name: evil, Start: 510, Dur: 100, Bytes: 4096, Peer: peer, Seq: 0, Step: 0, Algo: evil, Root: -1, Chunk: 0, Comm: evil},
			{Rank: int32(r), Kind: trace.KindRecv, Name: evil, Start: 520, Dur: 200, Bytes: 4096, Peer: peer, Seq: 0, Step: 0, Algo: evil, Root: -1, Chunk: 0, Comm: evil, Wait: 50},
		}
		f, err := os.Create(filepath.Join(dir, trace.RankFile(r)))
		if err != nil {
			t.Fatal(err)
		}
		w, err := trace.NewWriter(f, trace.RankInfo{Rank: r, WorldSize: 2, Host: "host" + evil}, trace.WriterOptions{})
		if err == nil {
			err = w.Write(evs)
		}
		if err == nil {
			err = w.Close()
		}
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		m.Ranks = append(m.Ranks, trace.RankEntry{Rank: r, Host: "host" + evil, File: trace.RankFile(r)})
	}
	if err := trace.WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "report.html")
	if r := commprof(t, nil, "report", dir); r.code != 0 {
		t.Fatalf("report: exit %d\n%s", r.code, r.stderr)
	}
	td := timelineOf(t, page)
	hover := -1
	for i, n := range td.Events.Name {
		if td.Names[n] == evil {
			hover = i
			break
		}
	}
	res := webtest.CheckPage(t, page, webtest.Options{HoverEvent: hover, WaitFor: drawn,
		Screenshot: filepath.Join(webtest.ScreenshotDir(t), "xss.png"),
		Eval: `({pwned: window.__pwned === undefined ? 0 : window.__pwned,
			text: document.body.innerText.split(` + "`" + evil + "`" + `).length - 1,
			imgs: document.images.length,
			title: document.title})`})
	if p := res.Problems(); len(p) > 0 {
		t.Fatalf("the page has problems: %q", p)
	}
	var got struct {
		Pwned, Text, Imgs int
		Title             string
	}
	if err := json.Unmarshal(res.Eval, &got); err != nil {
		t.Fatal(err)
	}
	// The name shows as text in the title, the config, the tables and the
	// pattern list; nothing ran and no element was made of it.
	if got.Pwned != 0 || got.Imgs != 0 || got.Text < 3 || !strings.Contains(got.Title, evil) {
		t.Fatalf("escaping: %+v", got)
	}
	if !strings.Contains(res.Tooltip, evil) {
		t.Fatalf("the timeline tooltip should show the name as text: %q", res.Tooltip)
	}
}

// TestReportOpen: --open says when no browser could be opened and where
// the report is, and exits 0 (the report was written: `report --open &&
// ...` goes on); a browser that opens the file is enough.
func TestReportOpen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	recordBench(t, dir, "2", "allreduce", "ring", "1K")
	out := filepath.Join(t.TempDir(), "r.html")
	bin := t.TempDir()
	// A PATH without a desktop opener, and $BROWSER one that fails.
	if err := os.WriteFile(filepath.Join(bin, "nobrowser"), []byte("#!/bin/sh\necho 'no display' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "okbrowser"), []byte("#!/bin/sh\ntest -f \"$1\" && echo \"$1\" > \"$0.opened\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := "PATH=" + bin
	r := commprof(t, []string{path, "BROWSER=nobrowser"}, "report", dir, "-o", out, "--open")
	if r.code != 0 || !strings.Contains(r.stderr, "could not open a browser (nobrowser: exit status 3 no display); open the report yourself: "+out) {
		t.Errorf("a failing browser: exit %d, %q", r.code, r.stderr)
	}
	if _, err := os.Stat(out); err != nil {
		t.Errorf("the report was not written: %v", err)
	}
	r = commprof(t, []string{path}, "report", dir, "-o", out, "--open")
	if r.code != 0 || !strings.Contains(r.stderr, "no browser found") || !strings.Contains(r.stderr, "open the report yourself: "+out) {
		t.Errorf("no browser: exit %d, %q", r.code, r.stderr)
	}
	r = commprof(t, []string{path, "BROWSER=okbrowser"}, "report", dir, "-o", out, "--open")
	if got, err := os.ReadFile(filepath.Join(bin, "okbrowser.opened")); r.code != 0 || err != nil || strings.TrimSpace(string(got)) != out {
		t.Errorf("a browser that opens it: exit %d, %q, opened %q (%v)", r.code, r.stderr, got, err)
	}
}

// TestBenchReportInBrowser: a recorded benchmark's report is titled by the
// run's name (--name), says what it measured beneath, and opens with its
// bandwidth by size, the figures of the benchmark's own table.
func TestBenchReportInBrowser(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	r := commprof(t, nil, "record", "--ranks", "2", "--out", dir, "--name", "ring-nightly", "--", "bench", "allreduce", "-b", "1K", "-e", "1M", "-n", "10", "-w", "2")
	if r.code != 0 {
		t.Fatalf("record: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	bench := map[string][]string{} // by size as the page prints it
	for _, row := range tableRows(t, r.stdout) {
		n, _ := strconv.ParseInt(row[0], 10, 64)
		bench[units.Bytes(n)] = row
	}
	page := filepath.Join(t.TempDir(), "bench.html")
	if r := commprof(t, nil, "report", dir, "-o", page); r.code != 0 {
		t.Fatalf("report: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	res := webtest.CheckPage(t, page, webtest.Options{WaitFor: drawn, Viewport: "1280x800",
		Eval: `({title: document.getElementById('title').textContent,
			doc: document.title,
			subtitle: document.querySelector('.cp-subtitle').textContent,
			first: document.querySelector('.cp-section').id,
			cards: [...document.querySelectorAll('.cp-card-label')].map(e => e.textContent),
			rows: [...document.querySelectorAll('#bandwidth tbody tr')].map(r => [...r.cells].map(c => c.textContent)),
			clipped: ` + webtest.ClippedJS + `})`})
	if p := res.Problems(); len(p) > 0 {
		t.Fatalf("the bench report has problems: %q", p)
	}
	var got struct {
		Title, Doc, Subtitle, First string
		Cards                       []string
		Rows                        [][]string
		Clipped                     []string
	}
	if err := json.Unmarshal(res.Eval, &got); err != nil {
		t.Fatal(err)
	}
	if got.Title != "ring-nightly" || !strings.HasPrefix(got.Doc, "ring-nightly") || !strings.HasPrefix(got.Subtitle, "bench allreduce · 2 ranks") {
		t.Errorf("title %q, document title %q, subtitle %q: want the run's name, and what it measured beneath", got.Title, got.Doc, got.Subtitle)
	}
	if got.First != "bandwidth" || slices.Contains(got.Cards, "communication") || !slices.Contains(got.Cards, "peak bus bandwidth") {
		t.Errorf("title %q, first section %q, cards %q", got.Title, got.First, got.Cards)
	}
	if len(got.Rows) != len(bench) {
		t.Fatalf("%d rows on the page, %d in the benchmark's table:\n%s", len(got.Rows), len(bench), r.stdout)
	}
	for _, row := range got.Rows {
		b, ok := bench[row[1]]
		if !ok {
			t.Errorf("page row %q: no such size in the benchmark", row)
			continue
		}
		// columns: op size algo ranks calls time algbw busbw wait; the
		// benchmark's: size count type algo time(us) algbw busbw #wrong.
		// The page's loop is the benchmark's, read from the marks that
		// carry its clock readings: they differ by the printing alone
		// (three decimals each).
		for _, col := range [][2]int{{6, 5}, {7, 6}} {
			pv, _ := strconv.ParseFloat(row[col[0]], 64)
			bv, _ := strconv.ParseFloat(b[col[1]], 64)
			if math.Abs(pv-bv) > 0.0010001 {
				t.Errorf("size %s: page %q, benchmark %q", row[1], row, b)
			}
		}
		if row[2] != b[3] || row[4] != "10" {
			t.Errorf("size %s: page %q, benchmark %q", row[1], row, b)
		}
	}
	if len(got.Clipped) > 0 {
		t.Errorf("at 1280 px the bench report draws outside its boxes: %q", got.Clipped)
	}
}
