package analyze

// The thresholds of the headline's verdicts (Headline.CommHigh,
// ExposedHigh): communication that takes more than 30% of a step is a
// large part of it, and more than half of it exposed is mostly not
// hidden behind compute.
const (
	CommHighFraction    = 0.3
	ExposedHighFraction = 0.5
)

// judge sets what follows from the figures already computed: the
// headline's verdicts and a benchmark's key numbers, and each collective
// group's wait fraction and time per call. It runs after the figures a
// run's source cannot give were zeroed (Summary.Unknown), so that those
// derived from them are zero too.
func judge(s *Summary, h *Headline) {
	h.CommHigh = h.CommFraction > CommHighFraction && !s.IsUnknown("comm")
	h.ExposedHigh = h.ExposedFrac > ExposedHighFraction && !s.IsUnknown("exposed")
	h.PeakBusBW, h.LargestBusBW, h.CallBytesMin, h.CallBytesMax = nil, nil, 0, 0
	seen := false
	for i := range s.Collectives {
		c := &s.Collectives[i]
		c.WaitFraction, c.CallNS = 0, 0
		if c.Time.Sum > 0 {
			c.WaitFraction = float64(c.WaitNS) / float64(c.Time.Sum)
		}
		if c.Calls == 0 {
			continue
		}
		size := c.Bytes / c.Calls
		if c.AlgBWGBps > 0 {
			c.CallNS = float64(size) / c.AlgBWGBps
		}
		if c.Op == "barrier" {
			continue
		}
		p := &SizeBusBW{Op: c.Op, Algo: c.Algo, CallBytes: size, BusBWGBps: c.BusBWGBps, AlgBWGBps: c.AlgBWGBps}
		if p.BusBWGBps > 0 && (h.PeakBusBW == nil || p.BusBWGBps > h.PeakBusBW.BusBWGBps) {
			h.PeakBusBW = p
		}
		if l := h.LargestBusBW; l == nil || size > l.CallBytes || size == l.CallBytes && p.BusBWGBps > l.BusBWGBps {
			h.LargestBusBW = p
		}
		if !seen || size < h.CallBytesMin {
			h.CallBytesMin = size
		}
		h.CallBytesMax, seen = max(h.CallBytesMax, size), true
	}
}
