package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/commprof/commprof/analyze/analyzetest"
	"github.com/commprof/commprof/internal/webtest"
	"github.com/commprof/commprof/trace"
)

// axisLabelsJS lists, for every chart drawn, the labels of each value
// axis as the page prints them.
const axisLabelsJS = `[...document.querySelectorAll('[data-chart][data-drawn]')].flatMap(el => {
	const c = echarts.getInstanceByDom(el);
	if (!c) return [];
	const m = c.getModel();
	const out = [];
	for (const kind of ['yAxis', 'xAxis']) {
		m.eachComponent(kind, a => {
			const t = a.get('type');
			if (t !== 'value' && t !== 'log') return;
			out.push({chart: el.id, axis: kind, labels: a.axis.getViewLabels().map(l => l.formattedLabel)});
		});
	}
	return out;
})`

// TestAxesOfSmallTimes: a run whose times are a ns or none draws time axes
// whose labels differ from one another (not 0 ns, 0 ns, 1 ns, 1 ns: ticks
// at fractions of a ns), each with its unit.
func TestAxesOfSmallTimes(t *testing.T) {
	r := &trace.Run{Dir: "d", Manifest: &trace.Manifest{Name: "tiny", WorldSize: 2}}
	for rank := range int32(2) {
		peer := 1 - rank
		r.Ranks = append(r.Ranks, trace.Rank{Info: trace.RankInfo{Rank: int(rank), WorldSize: 2}, Events: []trace.Event{
			{Rank: rank, Kind: trace.KindStep, Name: "step", Start: 0, Dur: 1, Peer: -1, Seq: -1, Step: 0, Root: -1, Chunk: -1},
			{Rank: rank, Kind: trace.KindCompute, Name: "forward", Start: 0, Dur: 1, Peer: -1, Seq: -1, Step: 0, Root: -1, Chunk: -1},
			{Rank: rank, Kind: trace.KindCollective, Name: "allreduce", Start: 0, Dur: 1, Bytes: 4096, Peer: -1, Seq: 0, Step: 0, Algo: "ring", Root: -1, Chunk: -1, Comm: "world"},
			{Rank: rank, Kind: trace.KindSend, Name: "allreduce", Start: 0, Dur: 1, Bytes: 4096, Peer: peer, Seq: 0, Step: 0, Algo: "ring", Root: -1, Chunk: 0, Comm: "world"},
			{Rank: rank, Kind: trace.KindRecv, Name: "allreduce", Start: 0, Dur: 1, Bytes: 4096, Peer: peer, Seq: 0, Step: 0, Algo: "ring", Root: -1, Chunk: 0, Comm: "world"},
		}})
	}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, analyzetest.Summarize(r), nil, Options{}); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(t.TempDir(), "report.html")
	if err := os.WriteFile(page, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	res := webtest.CheckPage(t, page, webtest.Options{HoverEvent: -1,
		WaitFor: `window.commprofReport && window.commprofReport.ready && document.querySelectorAll('[data-chart][data-drawn]').length === window.commprofReport.charts`,
		Eval:    axisLabelsJS})
	if p := res.Problems(); len(p) > 0 {
		t.Fatalf("the page has problems: %q", p)
	}
	var axes []struct {
		Chart, Axis string
		Labels      []string
	}
	if err := json.Unmarshal(res.Eval, &axes); err != nil {
		t.Fatal(err)
	}
	if len(axes) == 0 {
		t.Fatal("no value axis drawn")
	}
	for _, a := range axes {
		seen := map[string]bool{}
		for _, l := range a.Labels {
			if seen[l] {
				t.Errorf("%s %s: the label %q twice: %q", a.Chart, a.Axis, l, a.Labels)
				break
			}
			seen[l] = true
		}
	}
}
