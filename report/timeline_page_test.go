package report

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/commprof/commprof/internal/webtest"
)

const (
	laneStep = iota
	laneCompute
	laneCollective
	laneSend
	laneRecv
	nLanes
)

const evilName = "<script>alert(1)</script>"

var names = []string{"step", "data", "forward", "backward", "optimizer", "allreduce", "broadcast", evilName}

const (
	nameStep = iota
	nameData
	nameForward
	nameBackward
	nameOptimizer
	nameAllreduce
	nameBroadcast
	nameEvil
)

type synthEvent struct {
	rank, lane, name int
	start, dur       int64
	bytes            int64
	peer             int
	seq              int64
	step             int
	wait             int64
	partner          int // the matching send or recv, -1 for none
}

// synthetic is a made-up data-parallel run: every step loads data, runs
// forward and backward, allreduces its gradients in buckets during the
// backward pass (ring allreduce: 2(n-1) sends and receives per rank) and
// runs the optimizer; the last rank is a little slower. Step 0 starts
// with a broadcast from rank 0. Events are kept only inside the given
// steps (all when nil).
type synthetic struct {
	data   Timeline
	raw    []synthEvent
	hover  int // index into data.events of a send of the evil-named allreduce
	window [2]int64
}

func synthesize(ranks, steps, buckets, bins int, keepSteps []int) synthetic {
	rng := rand.New(rand.NewPCG(1, 2))
	var raw []synthEvent
	add := func(e synthEvent) int {
		if e.partner == 0 {
			e.partner = -1
		}
		raw = append(raw, e)
		return len(raw) - 1
	}
	jitter := func(ns int64) int64 { return ns + rng.Int64N(ns/10+1) }
	const gbps = 10 // bytes per ns
	sizes := []int64{4 << 20, 1 << 20, 16 << 20, 256 << 10}
	var seq int64
	t := int64(50_000)
	stepSpans := make([][2]int64, steps)
	for s := range steps {
		ready := make([]int64, ranks) // when each rank's backward may start a bucket
		stepStart := make([]int64, ranks)
		bwdStart := make([]int64, ranks)
		bwdDur := make([]int64, ranks)
		for r := range ranks {
			slow := int64(1)
			if r == ranks-1 {
				slow = 2
			}
			at := t + rng.Int64N(20_000)
			stepStart[r] = at
			d := jitter(400_000)
			add(synthEvent{rank: r, lane: laneCompute, name: nameData, start: at, dur: d, peer: -1, seq: -1, step: s})
			at += d
			if s == 0 {
				// rank 0 broadcasts the initial parameters.
				bytes := int64(2 << 20)
				dur := 20_000 + bytes/gbps
				for p := 1; p < ranks; p++ {
					b := at + int64(p-1)*dur
					snd := add(synthEvent{rank: 0, lane: laneSend, name: nameBroadcast, start: b, dur: dur, bytes: bytes, peer: p, seq: seq, step: s})
					rcv := add(synthEvent{rank: p, lane: laneRecv, name: nameBroadcast, start: at, dur: b + dur + 3000 - at, bytes: bytes, peer: 0, seq: seq, step: s, wait: b - at})
					raw[snd].partner, raw[rcv].partner = rcv, snd
				}
				add(synthEvent{rank: r, lane: laneCollective, name: nameBroadcast, start: at, dur: int64(ranks-1)*dur + 3000, bytes: bytes, peer: -1, seq: seq, step: s})
				at += int64(ranks-1)*dur + 3000
			}
			d = jitter(3_000_000) * (9 + slow) / 10
			add(synthEvent{rank: r, lane: laneCompute, name: nameForward, start: at, dur: d, peer: -1, seq: -1, step: s})
			if r == 0 && s == 3 {
				// rank 0 prefetches the next batch during forward: two
				// compute events at once, drawn on two levels.
				add(synthEvent{rank: r, lane: laneCompute, name: nameData, start: at + d/4, dur: d / 2, peer: -1, seq: -1, step: s})
			}
			at += d
			bwdStart[r] = at
			bwdDur[r] = jitter(5_000_000) * (9 + slow) / 10
			add(synthEvent{rank: r, lane: laneCompute, name: nameBackward, start: at, dur: bwdDur[r], peer: -1, seq: -1, step: s})
		}
		if s == 0 {
			seq++
		}
		var prevEnd int64
		for b := range buckets {
			size := sizes[(s+b)%len(sizes)]
			name := nameAllreduce
			if s == 2 && b == 1 {
				name, size = nameEvil, 1<<20
			}
			chunk := size / int64(ranks)
			chunkDur := 15_000 + chunk/gbps
			arrive := make([]int64, ranks)
			begin := prevEnd
			for r := range ranks {
				// A rank calls the allreduce when backward has produced the
				// bucket and the previous allreduce has returned.
				arrive[r] = max(prevEnd, bwdStart[r]+bwdDur[r]*int64(b+1)/int64(buckets+1))
				begin = max(begin, arrive[r])
			}
			nSteps := 2 * (ranks - 1)
			end := begin + int64(nSteps)*chunkDur
			sends := make([][]int, ranks)
			for r := range ranks {
				add(synthEvent{rank: r, lane: laneCollective, name: name, start: arrive[r], dur: end - arrive[r], bytes: size, peer: -1, seq: seq, step: s})
				for c := range nSteps {
					cs := begin + int64(c)*chunkDur
					sends[r] = append(sends[r], add(synthEvent{rank: r, lane: laneSend, name: name, start: cs, dur: chunkDur * 8 / 10, bytes: chunk, peer: (r + 1) % ranks, seq: seq, step: s}))
				}
			}
			for r := range ranks {
				from := (r + ranks - 1) % ranks
				for c := range nSteps {
					cs := begin + int64(c)*chunkDur
					w := chunkDur/10 + rng.Int64N(chunkDur/10)
					rcv := add(synthEvent{rank: r, lane: laneRecv, name: name, start: cs, dur: chunkDur * 95 / 100, bytes: chunk, peer: from, seq: seq, step: s, wait: w})
					snd := sends[from][c]
					raw[snd].partner, raw[rcv].partner = rcv, snd
				}
			}
			seq++
			prevEnd = end
			for r := range ranks {
				ready[r] = max(ready[r], end)
			}
		}
		var stepEnd int64
		for r := range ranks {
			at := max(ready[r], bwdStart[r]+bwdDur[r])
			d := jitter(600_000)
			add(synthEvent{rank: r, lane: laneCompute, name: nameOptimizer, start: at, dur: d, peer: -1, seq: -1, step: s})
			add(synthEvent{rank: r, lane: laneStep, name: nameStep, start: stepStart[r], dur: at + d - stepStart[r], peer: -1, seq: -1, step: s})
			stepEnd = max(stepEnd, at+d)
		}
		stepSpans[s] = [2]int64{t, stepEnd}
		t = stepEnd + 100_000
	}
	t1 := t

	var d Timeline
	d.T1 = t1
	for r := range ranks {
		d.Ranks = append(d.Ranks, r)
		d.Hosts = append(d.Hosts, fmt.Sprintf("node-%02d", r/8))
	}
	if ranks == 4 {
		d.Hosts = []string{"node-a", "node-a", "node-b", `<img src=x onerror=alert(2)>`}
	}
	d.Lanes = []string{"step", "compute", "collective", "send", "recv"}
	d.Names = names
	d.Algos = []string{"ring"}
	d.Comms = []string{"world"}

	// Windows and the events in them.
	if keepSteps == nil {
		d.Windows = [][2]int64{{0, t1}}
	}
	for _, s := range keepSteps {
		d.Windows = append(d.Windows, stepSpans[s])
	}
	inWindow := func(e synthEvent) bool {
		for _, w := range d.Windows {
			if e.start < w[1] && e.start+e.dur > w[0] {
				return true
			}
		}
		return false
	}
	order := make([]int, 0, len(raw))
	for i, e := range raw {
		if inWindow(e) {
			order = append(order, i)
		}
	}
	d.Truncated = int64(len(raw) - len(order))
	slices.SortStableFunc(order, func(a, b int) int {
		ea, eb := raw[a], raw[b]
		return cmp.Or(cmp.Compare(ea.rank, eb.rank), cmp.Compare(ea.lane, eb.lane), cmp.Compare(ea.start, eb.start))
	})
	index := make(map[int]int, len(order))
	ev := &d.Events
	prevRow, prevStart := -1, int64(0)
	for j, i := range order {
		e := raw[i]
		index[i] = j
		row := e.rank*nLanes + e.lane
		if row != prevRow {
			prevRow, prevStart = row, 0
		}
		ev.Rank = append(ev.Rank, int32(e.rank))
		ev.Lane = append(ev.Lane, int8(e.lane))
		ev.Name = append(ev.Name, int32(e.name))
		ev.Start = append(ev.Start, e.start-prevStart)
		prevStart = e.start
		ev.Dur = append(ev.Dur, e.dur)
		ev.Bytes = append(ev.Bytes, e.bytes)
		ev.Peer = append(ev.Peer, int32(e.peer))
		ev.Seq = append(ev.Seq, e.seq)
		algo := -1
		if e.lane >= laneCollective && e.name != nameBroadcast {
			algo = 0
		}
		ev.Algo = append(ev.Algo, int32(algo))
		ev.Step = append(ev.Step, int32(e.step))
		ev.Wait = append(ev.Wait, e.wait)
	}
	synth := synthetic{hover: -1}
	for j, i := range order {
		e := raw[i]
		if e.lane != laneSend || e.partner < 0 {
			continue
		}
		if k, ok := index[e.partner]; ok {
			d.Links = append(d.Links, [2]int{j, k})
		}
		if e.name == nameEvil && e.rank == 1 && synth.hover < 0 {
			synth.hover = j
		}
	}

	// Bins over every event, kept or not: per (rank, lane) the share of
	// each bin that was busy, and the name busy longest in it.
	d.Bins = TimelineBins{N: bins, Width: (t1 + int64(bins) - 1) / int64(bins)}
	byRow := make([][]synthEvent, ranks*nLanes)
	for _, e := range raw {
		byRow[e.rank*nLanes+e.lane] = append(byRow[e.rank*nLanes+e.lane], e)
	}
	w := d.Bins.Width
	for row, evs := range byRow {
		if len(evs) == 0 {
			continue
		}
		busy := make([]int64, bins)
		perName := make([][]int64, len(names))
		for _, e := range evs {
			if perName[e.name] == nil {
				perName[e.name] = make([]int64, bins)
			}
			for b := e.start / w; b < int64(bins) && b*w < e.start+e.dur; b++ {
				o := min(e.start+e.dur, (b+1)*w) - max(e.start, b*w)
				busy[b] += o
				perName[e.name][b] += o
			}
		}
		br := TimelineRow{Rank: row / nLanes, Lane: row % nLanes, Busy: make([]int32, bins), Name: make([]int32, bins)}
		for b := range bins {
			br.Busy[b] = int32(min(1000, busy[b]*1000/w))
			br.Name[b] = -1
			var best int64
			for n, ns := range perName {
				if ns != nil && ns[b] > best {
					best, br.Name[b] = ns[b], int32(n)
				}
			}
		}
		d.Bins.Rows = append(d.Bins.Rows, br)
	}
	synth.data = d
	synth.raw = raw
	if len(keepSteps) > 0 {
		synth.window = stepSpans[keepSteps[0]]
	}
	return synth
}

// writePage writes an HTML page that shows the data in a timeline, with
// the report's stylesheet, and returns its path. The data goes in a
// <script type="application/json"> element that the page parses with
// JSON.parse: json.Marshal writes "<", ">" and "&" as \u003c, \u003e and
// \u0026, so no string from a trace can close the element (an encoder with
// SetEscapeHTML(false) would not be safe here).
func writePage(t testing.TB, dir, name string, data Timeline, options string) string {
	t.Helper()
	js, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(js, []byte("<")) {
		t.Fatal("the JSON holds a '<'")
	}
	var b strings.Builder
	b.WriteString(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<title>commprof timeline</title>
<style>`)
	b.WriteString(reportCSSText)
	b.WriteString(`</style>
</head>
<body>
<main>
<header class="cp-header"><h1>Synthetic run</h1><span class="cp-subtitle">timeline test page</span></header>
<div class="cp-cards">
<div class="cp-card"><div class="cp-card-label">ranks</div><div class="cp-card-value">` + fmt.Sprint(len(data.Ranks)) + `</div></div>
<div class="cp-card"><div class="cp-card-label">events in windows</div><div class="cp-card-value">` + fmt.Sprint(len(data.Events.Rank)) + `</div><div class="cp-card-note">` + fmt.Sprint(data.Truncated) + ` more summarised</div></div>
<div class="cp-card" data-tone="warn"><div class="cp-card-label">exposed communication</div><div class="cp-card-value">23.4%</div></div>
<div class="cp-card"><div class="cp-card-label">allreduce busbw</div><div class="cp-card-value">8.12 GB/s</div></div>
</div>
<ul class="cp-findings">
<li class="cp-finding" data-severity="warn"><div class="cp-finding-title">Rank 3 arrives last at 94% of allreduces</div><div class="cp-finding-detail">by 0.61 ms on average; its backward pass is 10% slower.</div></li>
<li class="cp-finding" data-severity="good"><div class="cp-finding-title">Communication overlaps backward compute</div></li>
</ul>
<section class="cp-section"><h2>Timeline</h2><p class="cp-lead">Drag to pan, wheel to zoom, double click to reset.</p>
<div id="timeline"></div></section>
<section class="cp-section"><h2>Collectives</h2>
<div class="cp-table-wrap"><table class="cp-table"><thead><tr><th>op</th><th class="num">calls</th><th class="num">bytes</th><th class="num">time (ms)</th></tr></thead>
<tbody><tr><td>allreduce</td><td class="num">64</td><td class="num">1,207,959,552</td><td class="num">41.20</td></tr>
<tr><td>broadcast</td><td class="num">1</td><td class="num">2,097,152</td><td class="num">0.63</td></tr></tbody></table></div></section>
</main>
<script type="application/json" id="timeline-data">`)
	b.Write(js)
	b.WriteString("</script>\n<script>")
	b.WriteString(formatJS)
	b.WriteString("</script>\n<script>")
	b.WriteString(timelineJS)
	b.WriteString(`</script>
<script>
CommprofTimeline.mount(document.getElementById('timeline'), JSON.parse(document.getElementById('timeline-data').textContent), ` + options + `);
</script>
</body>
</html>
`)
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const timelineReady = `document.getElementById('timeline').commprofTimeline && document.getElementById('timeline').commprofTimeline.ready`

// checkScreenshot checks that the screenshot was written and is more than
// a blank page, and logs its path.
func checkScreenshot(t *testing.T, path string) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if st.Size() < 20_000 {
		t.Errorf("screenshot %s is only %d bytes", path, st.Size())
	}
	t.Logf("screenshot: %s", path)
}

func TestAssetsInline(t *testing.T) {
	scripts := map[string]string{"echarts.min.js": echartsJS, "format.js": formatJS, "report.js": reportJS, "live.js": liveJS}
	for _, p := range timelineParts {
		scripts[p.name] = p.js
	}
	for name, js := range scripts {
		if strings.Contains(strings.ToLower(js), "</script") {
			t.Errorf("%s contains </script and cannot be inlined", name)
		}
	}
	if strings.Contains(strings.ToLower(reportCSSText), "</style") {
		t.Error("report.css contains </style and cannot be inlined")
	}
	if len(echartsJS) < 100_000 || !strings.Contains(echartsJS, "echarts") {
		t.Errorf("echarts.min.js: %d bytes", len(echartsJS))
	}
}

// TestTimelineParts: every timeline script in assets/ is one of the parts
// that timelineJS joins, as the file is, and timeline.js, which mounts
// the others, comes last.
func TestTimelineParts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("assets", "timeline*.js"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	rest := timelineJS
	for _, p := range timelineParts {
		names = append(names, p.name)
		b, err := os.ReadFile(filepath.Join("assets", p.name))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != p.js {
			t.Errorf("part %s is not assets/%s as it is", p.name, p.name)
		}
		i := strings.Index(rest, p.js)
		if i < 0 {
			t.Errorf("timelineJS does not hold %s after the parts before it", p.name)
			continue
		}
		rest = rest[i+len(p.js):]
	}
	for _, f := range files {
		if !slices.Contains(names, filepath.Base(f)) {
			t.Errorf("%s is not one of timelineParts", f)
		}
	}
	if len(names) != len(files) || names[len(names)-1] != "timeline.js" {
		t.Errorf("timelineParts %v, want each of %v once, timeline.js last", names, files)
	}
}

func TestTimelinePage(t *testing.T) {
	s := synthesize(4, 16, 12, 1000, []int{2, 3, 4, 8, 9, 10, 11, 12, 13})
	if n := len(s.data.Events.Rank); n < 2000 || n > 20000 || s.hover < 0 {
		t.Fatalf("synthetic data: %d events, hover %d", n, s.hover)
	}
	dir := t.TempDir()
	page := writePage(t, dir, "timeline.html", s.data, "{}")
	shots := webtest.ScreenshotDir(t)
	clean := func(t *testing.T, r webtest.Result) {
		t.Helper()
		for _, p := range r.Problems() {
			t.Error(p)
		}
		t.Logf("load %.0f ms, drawn at %.0f ms", r.LoadMs, r.DrawMs)
	}

	t.Run("overview", func(t *testing.T) {
		t.Parallel()
		shot := filepath.Join(shots, "timeline-overview.png")
		r := webtest.CheckPage(t, page, webtest.Options{
			Screenshot: shot, FullPage: true, HoverEvent: -1, WaitFor: timelineReady,
			Eval: `(() => { const box = document.getElementById('timeline'); const tl = box.commprofTimeline;
				return { mode: tl.mode, legend: box.querySelector('.cp-tl-legend').textContent,
					scripts: document.scripts.length, images: document.images.length }; })()`,
		})
		clean(t, r)
		var got struct {
			Mode    string
			Legend  string
			Scripts int
			Images  int
		}
		if err := json.Unmarshal(r.Eval, &got); err != nil {
			t.Fatalf("eval %s: %v", r.Eval, err)
		}
		if got.Mode != "bins" {
			t.Errorf("the whole run is drawn as %q, want bins", got.Mode)
		}
		if !strings.Contains(got.Legend, evilName) {
			t.Errorf("legend %q does not show the name %s as text", got.Legend, evilName)
		}
		// The page's own: the data, format.js, the timeline (its parts as
		// one script) and the mount.
		if got.Scripts != 4 || got.Images != 0 {
			t.Errorf("%d scripts and %d images on the page: a name from the trace became HTML", got.Scripts, got.Images)
		}
		checkScreenshot(t, shot)
	})

	t.Run("zoomed", func(t *testing.T) {
		t.Parallel()
		shot := filepath.Join(shots, "timeline-zoomed.png")
		// The middle of step 2's backward pass, where the evil-named
		// allreduce's messages are.
		send := s.hover
		start := eventStart(s.data, send)
		r := webtest.CheckPage(t, page, webtest.Options{
			Screenshot: shot, HoverEvent: send, WaitFor: timelineReady,
			Eval: fmt.Sprintf(`(() => { const tl = document.getElementById('timeline').commprofTimeline;
				tl.zoomTo(%d, %d); return { mode: tl.mode, drawn: tl.drawnEvents }; })()`, start-600_000, start+1_400_000),
		})
		clean(t, r)
		var got struct {
			Mode  string
			Drawn int
		}
		if err := json.Unmarshal(r.Eval, &got); err != nil {
			t.Fatalf("eval %s: %v", r.Eval, err)
		}
		if got.Mode != "events" || got.Drawn < 50 {
			t.Errorf("zoomed in: mode %q with %d events drawn", got.Mode, got.Drawn)
		}
		lines := strings.Split(r.Tooltip, "\n")
		if lines[0] != evilName {
			t.Errorf("tooltip title %q, want the name as text %q", lines[0], evilName)
		}
		for _, want := range []string{"kind: send", "bytes: 256 KiB (262,144 B)", "peer: rank 2", "algo: ring", "step: 2", "bandwidth: "} {
			if !strings.Contains(r.Tooltip, want) {
				t.Errorf("tooltip lacks %q:\n%s", want, r.Tooltip)
			}
		}
		checkScreenshot(t, shot)
	})

	t.Run("interactions", func(t *testing.T) {
		t.Parallel()
		r := webtest.CheckPage(t, page, webtest.Options{HoverEvent: -1, WaitFor: timelineReady, Eval: fmt.Sprintf(interactions, s.hover, s.hover)})
		clean(t, r)
		var got struct {
			WheelZoom, WheelDrift, DragPx, Plus, Minus float64
			Reset                                      bool
			Pinned, Legend                             string
		}
		if err := json.Unmarshal(r.Eval, &got); err != nil {
			t.Fatalf("eval %s: %v", r.Eval, err)
		}
		if got.WheelZoom < 1.5 || got.WheelDrift > 0.01 {
			t.Errorf("wheel: zoomed %.2fx, the time under the cursor moved by %.3f of the view", got.WheelZoom, got.WheelDrift)
		}
		if got.DragPx < 99 || got.DragPx > 101 {
			t.Errorf("a 100 px drag moved the view by %.1f px", got.DragPx)
		}
		if got.Plus < 1.99 || got.Plus > 2.01 || got.Minus < 1.99 || got.Minus > 2.01 {
			t.Errorf("+ zoomed %.2fx, - %.2fx; want 2x", got.Plus, got.Minus)
		}
		if !got.Reset {
			t.Error("double click did not show the whole run")
		}
		if !strings.Contains(got.Pinned, evilName) || !strings.Contains(got.Pinned, "matching recv") {
			t.Errorf("clicking the event pinned %q", got.Pinned)
		}
		if !strings.Contains(got.Legend, "GB/s") {
			t.Errorf("bandwidth legend %q", got.Legend)
		}
	})

	t.Run("bandwidth", func(t *testing.T) {
		t.Parallel()
		shot := filepath.Join(shots, "timeline-bandwidth.png")
		recv := -1
		for i, l := range s.data.Events.Lane {
			if l == laneRecv && s.data.Events.Rank[i] == 3 && s.data.Events.Step[i] == 8 {
				recv = i
				break
			}
		}
		a, b := s.data.Windows[3][0], s.data.Windows[3][1]
		r := webtest.CheckPage(t, page, webtest.Options{
			Screenshot: shot, HoverEvent: recv, WaitFor: timelineReady,
			Eval: fmt.Sprintf(`(() => { const tl = document.getElementById('timeline').commprofTimeline;
				tl.setColorBy('bandwidth'); tl.zoomTo(%d, %d); return tl.mode; })()`, a, b),
		})
		clean(t, r)
		if string(r.Eval) != `"events"` {
			t.Errorf("a whole step is drawn as %s, want events", r.Eval)
		}
		for _, want := range []string{"kind: recv", "peer: rank 2", "wait: "} {
			if !strings.Contains(r.Tooltip, want) {
				t.Errorf("tooltip lacks %q:\n%s", want, r.Tooltip)
			}
		}
		checkScreenshot(t, shot)
	})
}

// BenchmarkTimelineDraw measures how long the timeline takes to draw 64
// ranks and about 340,000 events in Chromium, at three zoom levels: the
// whole run (bins), one step (bins or events, with the default detail
// limit) and half a millisecond (events and message lines); and the whole
// run and one step again with every event drawn (no detail limit), to
// measure the pixel merging. Each figure is the median over b.N draws,
// timed in the page until the canvas's pixels are readable.
func BenchmarkTimelineDraw(b *testing.B) {
	s := synthesize(64, 7, 3, 2000, nil)
	dir := b.TempDir()
	measure := fmt.Sprintf(`(() => {
		const box = document.getElementById('timeline');
		const tl = box.commprofTimeline;
		const c = box.querySelector('.cp-tl-canvas').getContext('2d');
		const t1 = tl.view()[1];
		const time = (a, b) => {
			const ts = [];
			let mode, drawn;
			for (let i = 0; i < %d; i++) {
				const s = performance.now();
				tl.zoomTo(a + i, b + i);
				c.getImageData(0, 0, 1, 1);
				ts.push(performance.now() - s);
				mode = tl.mode;
				drawn = tl.drawnEvents;
			}
			ts.sort((x, y) => x - y);
			return { ms: ts[ts.length >> 1], mode, drawn };
		};
		return { whole: time(0, t1), step: time(t1 * 0.4, t1 * 0.4 + t1 / 7), fine: time(t1 * 0.5, t1 * 0.5 + 500000) };
	})()`, max(b.N, 5))
	var got [2]struct {
		Whole, Step, Fine struct {
			Ms    float64
			Mode  string
			Drawn int
		}
	}
	var loads [2]webtest.Result
	for j, options := range []string{"{}", "{detailLimit: Infinity}"} {
		page := writePage(b, dir, fmt.Sprintf("bench%d.html", j), s.data, options)
		r := webtest.CheckPage(b, page, webtest.Options{HoverEvent: -1, WaitFor: timelineReady, Eval: measure, Timeout: 2 * time.Minute})
		for _, p := range r.Problems() {
			b.Error(p)
		}
		if err := json.Unmarshal(r.Eval, &got[j]); err != nil {
			b.Fatalf("eval %s: %v", r.Eval, err)
		}
		loads[j] = r
	}
	b.Logf("%d events, %d ranks; limited: %+v; unlimited: %+v", len(s.data.Events.Rank), len(s.data.Ranks), got[0], got[1])
	b.ReportMetric(got[0].Whole.Ms, "ms/draw-whole")
	b.ReportMetric(got[0].Step.Ms, "ms/draw-step")
	b.ReportMetric(got[0].Fine.Ms, "ms/draw-fine")
	b.ReportMetric(got[1].Whole.Ms, "ms/draw-whole-all-events")
	b.ReportMetric(got[1].Step.Ms, "ms/draw-step-all-events")
	b.ReportMetric(loads[0].DrawMs, "ms-to-first-draw")
}

// interactions drives the timeline with synthetic input events: a wheel
// zoom at a quarter of the width, a 100 px drag, the + and - buttons, a
// double click, a click on event N and the colour control.
const interactions = `(async () => {
	const box = document.getElementById('timeline');
	box.scrollIntoView();
	const tl = box.commprofTimeline;
	const vp = box.querySelector('.cp-tl-viewport');
	const r = box.querySelector('.cp-tl-canvas').getBoundingClientRect();
	const frame = () => new Promise((done) => requestAnimationFrame(() => done()));
	const gutter = 132, plotW = r.width - 140;
	const x = r.left + gutter + plotW / 4, y = r.top + 100;
	const timeAt = (v, cx) => v[0] + ((cx - r.left - gutter) / plotW) * (v[1] - v[0]);
	const pointer = (type, cx, cy) => vp.dispatchEvent(new PointerEvent(type, { pointerId: 7, button: 0, buttons: type === 'pointerup' ? 0 : 1, clientX: cx, clientY: cy, bubbles: true }));
	const span = (v) => v[1] - v[0];
	const out = {};
	const full = tl.view();
	vp.dispatchEvent(new WheelEvent('wheel', { deltaY: -500, clientX: x, clientY: y, bubbles: true, cancelable: true }));
	await frame();
	const zoomed = tl.view();
	out.wheelZoom = span(full) / span(zoomed);
	out.wheelDrift = Math.abs(timeAt(zoomed, x) - timeAt(full, x)) / span(zoomed);
	pointer('pointerdown', x, y);
	pointer('pointermove', x + 50, y);
	pointer('pointermove', x + 100, y);
	pointer('pointerup', x + 100, y);
	await frame();
	const dragged = tl.view();
	out.dragPx = ((zoomed[0] - dragged[0]) / span(zoomed)) * plotW;
	const buttons = box.querySelectorAll('.cp-tl-buttons button');
	buttons[1].click();
	await frame();
	const plus = tl.view();
	out.plus = span(dragged) / span(plus);
	buttons[0].click();
	await frame();
	out.minus = span(tl.view()) / span(plus);
	vp.dispatchEvent(new MouseEvent('dblclick', { clientX: x, clientY: y, bubbles: true, cancelable: true }));
	await frame();
	out.reset = tl.view()[0] === full[0] && tl.view()[1] === full[1];
	tl.reveal(%d);
	const p = tl.screenPositionOf(%d);
	pointer('pointerdown', p.x, p.y);
	pointer('pointerup', p.x, p.y);
	const details = box.querySelector('.cp-tl-details');
	out.pinned = details.hidden ? '' : details.textContent;
	const select = box.querySelector('.cp-tl-colour select');
	select.value = 'bandwidth';
	select.dispatchEvent(new Event('change'));
	out.legend = box.querySelector('.cp-tl-legend').textContent;
	return out;
})()`

// eventStart undoes the per-row delta encoding for event i.
func eventStart(d Timeline, i int) int64 {
	var t int64
	for j := i; j >= 0; j-- {
		if d.Events.Rank[j] != d.Events.Rank[i] || d.Events.Lane[j] != d.Events.Lane[i] {
			break
		}
		t += d.Events.Start[j]
	}
	return t
}
