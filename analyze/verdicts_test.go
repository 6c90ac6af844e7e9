package analyze

import "testing"

// The headline's verdicts and a benchmark's key numbers follow from the
// figures: barriers are left out, the peak is the highest busbw, the
// largest size the highest busbw among the groups of that size.
func TestJudge(t *testing.T) {
	s := &Summary{Collectives: []CollStats{
		{Op: "allreduce", Algo: "ring", Calls: 10, Bytes: 10 << 10, BusBWGBps: 2, AlgBWGBps: 1, WaitNS: 30, Time: Dist{Sum: 120}},
		{Op: "allreduce", Algo: "ring", Calls: 10, Bytes: 10 << 20, BusBWGBps: 1, AlgBWGBps: 0.5},
		{Op: "allreduce", Algo: "tree", Calls: 5, Bytes: 5 << 20, BusBWGBps: 1.5, AlgBWGBps: 0.75},
		{Op: "barrier", Algo: "dissemination", Calls: 3, BusBWGBps: 0, Time: Dist{Sum: 10}},
		{Op: "broadcast", Algo: "tree", Calls: 2, Bytes: 0, BusBWGBps: 9},
	}}
	h := Headline{CommFraction: 0.31, ExposedFrac: 0.5}
	judge(s, &h)
	if !h.CommHigh || h.ExposedHigh {
		t.Errorf("31%% communication, half of it exposed: high %v, exposed high %v", h.CommHigh, h.ExposedHigh)
	}
	if p := h.PeakBusBW; p == nil || p.Op != "broadcast" || p.BusBWGBps != 9 {
		t.Errorf("peak %+v", p)
	}
	if l := h.LargestBusBW; l == nil || l.Algo != "tree" || l.CallBytes != 1<<20 || l.BusBWGBps != 1.5 {
		t.Errorf("largest %+v", l)
	}
	if h.CallBytesMin != 0 || h.CallBytesMax != 1<<20 {
		t.Errorf("sizes %d–%d", h.CallBytesMin, h.CallBytesMax)
	}
	if c := s.Collectives[0]; c.WaitFraction != 0.25 || c.CallNS != 1024 {
		t.Errorf("wait fraction %v, time per call %v ns (1 KiB at 1 GB/s)", c.WaitFraction, c.CallNS)
	}
	// A source without the figure: no verdict on it.
	s.Unknown = []string{"exposed"}
	h = Headline{ExposedFrac: 0.9}
	if judge(s, &h); h.ExposedHigh {
		t.Error("an unknown exposure judged high")
	}
}
