package report

import (
	"encoding/json"
	"testing"

	"github.com/commprof/commprof/analyze"
)

// TestDiffStepChartAtAnyRatio: two runs whose mean steps differ many
// times over (5 ms beside 172 ms) are drawn first side by side on a log
// axis, where the shorter one reads, with both totals; runs of like
// steps keep the stacked bars alone.
func TestDiffStepChartAtAnyRatio(t *testing.T) {
	step := func(compute, exposed float64) *analyze.Summary {
		return &analyze.Summary{StepSummary: analyze.StepSummary{ComputeNS: compute, ExposedNS: exposed}}
	}
	d := &analyze.Diff{Basis: "step"}
	c := diffStepChart(step(4e6, 1e6), step(100e6, 72e6), d)
	if len(c.Variants) != 2 || c.Variants[0].Label != "side by side, log scale" || c.Variants[1].Label != "stacked" {
		t.Fatalf("5 ms beside 172 ms: variants %+v, want the log scale first, then stacked", c.Variants)
	}
	var opt struct {
		YAxis []struct {
			Type string `json:"type"`
		} `json:"yAxis"`
		XAxis []struct {
			Data []string `json:"data"`
		} `json:"xAxis"`
		Series []struct {
			Name string `json:"name"`
			Data []struct {
				Value any `json:"value"`
			} `json:"data"`
		} `json:"series"`
	}
	if err := json.Unmarshal(c.Variants[0].Option, &opt); err != nil {
		t.Fatal(err)
	}
	if len(opt.YAxis) != 1 || opt.YAxis[0].Type != "log" || len(opt.XAxis) != 1 || opt.XAxis[0].Data[0] != "step" || len(opt.Series) != 2 {
		t.Fatalf("the log variant: %+v", opt)
	}
	if a, b := opt.Series[0].Data[0].Value, opt.Series[1].Data[0].Value; a != 5e6 || b != 172e6 {
		t.Errorf("the steps' totals: A %v, B %v; want 5e6 and 172e6", a, b)
	}
	if c := diffStepChart(step(4e6, 1e6), step(4e6, 2e6), d); len(c.Variants) != 1 || c.Variants[0].Label != "stacked" {
		t.Errorf("5 ms beside 6 ms: variants %+v, want the stacked bars alone", c.Variants)
	}
}
