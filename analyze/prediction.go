package analyze

// Prediction is what commprof predict finds: the model it used and the
// run's allreduces projected to other rank counts, and, when asked, how
// the model predicts a measured run (its JSON output).
type Prediction struct {
	Fit        Fit              `json:"fit"`
	Projection *Projection      `json:"projection"`
	Check      *PredictionCheck `json:"check,omitempty"`
}

// PredictionCheck is the model's prediction of a measured run's
// allreduces at its own rank count, against what was measured.
type PredictionCheck struct {
	Run         string     `json:"run"`
	Ranks       int        `json:"ranks"`
	MeasuredNS  float64    `json:"measured_ns"`
	PredictedNS float64    `json:"predicted_ns"`
	Error       float64    `json:"error"` // (predicted - measured) / measured
	Calls       []CallSize `json:"calls"`
}

// CheckPrediction predicts the allreduces on the world communicator of
// the measured run m (in dir) with fit, at its own rank count; nil when m
// has none.
func CheckPrediction(m *Summary, dir string, fit Fit) *PredictionCheck {
	p := m.ProjectWith(fit, []int{m.Run.WorldSize}, nil)
	if p == nil {
		return nil
	}
	c := &PredictionCheck{Run: dir, Ranks: m.Run.WorldSize, MeasuredNS: p.Measured, PredictedNS: p.Modeled, Calls: p.Calls}
	if p.Measured > 0 {
		c.Error = (p.Modeled - p.Measured) / p.Measured
	}
	return c
}
