package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/analyze/analyzetest"
	"github.com/commprof/commprof/trace"
)

// TestDiagnosisLeads checks that the report and the text of a run the
// doctor found hung lead with its diagnosis, escaped, and that a healthy
// run shows none.
func TestDiagnosisLeads(t *testing.T) {
	all := []int{0, 1}
	d := analyze.Diagnose(analyze.DoctorInput{Live: true, Now: time.Now(), InFlight: []*trace.InFlight{
		{Rank: 0, World: 2, State: trace.InFlightBlocked, Kind: trace.InFlightCollective, Op: "allreduce", Comm: "<world>", Seq: 5, Root: -1, Peer: -1, Members: all},
		{Rank: 1, World: 2, State: trace.InFlightComputing, Kind: trace.InFlightCollective, Op: "allreduce", Comm: "<world>", Seq: 4, Root: -1, Peer: -1, Members: all},
	}})
	if len(d.Culprits) != 1 || d.Culprits[0] != 1 {
		t.Fatalf("culprits %v, want [1]", d.Culprits)
	}
	s := analyzetest.Summarize(run())
	s.Diagnosis = &d
	var buf bytes.Buffer
	if err := WriteHTML(&buf, s, nil, Options{}); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	i, j := strings.Index(page, `id="diagnosis"`), strings.Index(page, `id="cards"`)
	if i < 0 || j < i {
		t.Fatalf("no diagnosis box before the cards")
	}
	if box := page[i:j]; !strings.Contains(box, "culprit: rank 1") || !strings.Contains(box, "allreduce #6 on &lt;world&gt;") {
		t.Errorf("the diagnosis box does not name rank 1 and its call, escaped:\n%s", box)
	}
	var text bytes.Buffer
	if err := WriteDiagnosis(&text, &d); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(text.String(), "verdict: hang") || !strings.Contains(text.String(), "   1* computing") {
		t.Errorf("text:\n%s", text.String())
	}
	s.Diagnosis = nil
	buf.Reset()
	if err := WriteHTML(&buf, s, nil, Options{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), `id="diagnosis"`) {
		t.Error("a run without a diagnosis shows a diagnosis box")
	}
}
