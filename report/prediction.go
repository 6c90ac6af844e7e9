package report

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/units"
)

// WritePrediction writes what commprof predict found for the runs dirs
// (the first projected, all fitted) as text.
func WritePrediction(w io.Writer, dirs []string, res *analyze.Prediction) {
	f, p := res.Fit, res.Projection
	from := strings.Join(dirs, ", ")
	if f.Source != "run" && f.Source != "runs" {
		from = f.Source
	}
	fmt.Fprintf(w, "model from %s: %d collective calls of %d sizes on %v ranks\n", from, f.Calls, f.Sizes, f.RankCounts)
	fmt.Fprintf(w, "  alpha %s per step, beta %.4g ns/byte within a host (by message size where calibrated)", units.Duration(f.AlphaNS), f.BetaNSPerB)
	if f.AlphaNetNS > 0 || f.BetaNetNSPerB > 0 {
		fmt.Fprintf(w, "; alpha %s and beta %.4g ns/byte between hosts", units.Duration(f.AlphaNetNS), f.BetaNetNSPerB)
	}
	fmt.Fprintf(w, "; link %s; gamma %.4g ns/byte", units.GBps(f.LinkGBps), f.GammaNSPerB)
	if f.GammaFrom != "" {
		fmt.Fprintf(w, " (from %s)", f.GammaFrom)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  R² %.3f, median error %s over the calls it was fitted to\n", f.CallR2, units.Percent(f.MedianError, 0))
	fmt.Fprintf(w, "\n%s's allreduces at its %d ranks: measured %s per %s, model %s (%s)\n", dirs[0], p.Current,
		units.Duration(p.Measured), p.Basis, units.Duration(p.Modeled), relErr(p.Modeled, p.Measured))
	if p.Assumed != "" {
		fmt.Fprintf(w, "  (%s)\n", p.Assumed)
	}
	t := &Table{Title: "Projected allreduce time per " + p.Basis, Columns: []Column{{Name: "algorithm"}}}
	for _, r := range p.Ranks {
		t.Columns = append(t.Columns, Column{Name: fmt.Sprintf("%d ranks", r), Numeric: true})
	}
	for i, a := range p.Algos {
		row := []string{a}
		for j := range p.Ranks {
			row = append(row, units.Duration(p.TimeNS[i][j]))
		}
		t.Rows = append(t.Rows, row)
	}
	fmt.Fprintf(w, "\n%s\n", t.Title)
	t.WriteText(w)
	if c := res.Check; c != nil {
		fmt.Fprintf(w, "\ncheck against %s (%d ranks): measured %s, predicted %s (%s)\n", c.Run, c.Ranks,
			units.Duration(c.MeasuredNS), units.Duration(c.PredictedNS), relErr(c.PredictedNS, c.MeasuredNS))
		ct := &Table{Columns: []Column{{Name: "size", Numeric: true}, {Name: "algorithm"}, {Name: "calls", Numeric: true},
			{Name: "measured", Numeric: true}, {Name: "predicted", Numeric: true}, {Name: "error", Numeric: true}}}
		for _, cs := range c.Calls {
			ct.Rows = append(ct.Rows, []string{units.Bytes(cs.Bytes), cs.Algo, fmt.Sprintf("%.4g", cs.PerStep),
				units.Duration(cs.MeasuredNS), units.Duration(cs.ModeledNS), relErr(cs.ModeledNS, cs.MeasuredNS)})
		}
		ct.WriteText(w)
	}
}

func relErr(pred, meas float64) string {
	if meas == 0 || math.IsNaN(pred) {
		return "no measurement"
	}
	return fmt.Sprintf("%+.0f%%", 100*(pred-meas)/meas)
}
