package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/load"
)

// PredictOptions say what Predict projects and checks.
type PredictOptions struct {
	Runs  []string // the run to project, then runs fitted with it
	Ranks []int
	Algos []string
	Model string // a model file to use instead of fitting the runs ("": fit)
	Check string // a measured run to check the model against ("": none)
	Warn  io.Writer
}

// Predict fits the alpha-beta-gamma model to the runs (or takes a
// calibrated one), projects the first run's allreduces to o.Ranks and,
// with o.Check, predicts that run's.
func Predict(ctx context.Context, o PredictOptions) (*analyze.Prediction, error) {
	var sums []*analyze.Summary
	for _, d := range o.Runs {
		s, err := load.Summary(ctx, d)
		if err != nil {
			return nil, err
		}
		if o.Warn != nil {
			for _, p := range s.Problems {
				fmt.Fprintf(o.Warn, "commprof: warning: %s\n", p)
			}
		}
		sums = append(sums, s)
	}
	fit := analyze.PooledFit(sums...)
	if o.Model != "" {
		m, err := ReadModel(o.Model)
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				return nil, Usagef("--model: %v", err)
			}
			return nil, err
		}
		fit = m.Fit
		fit.Source = o.Model
	}
	if !fit.Usable {
		return nil, fmt.Errorf("no projection: %s", fit.Reason)
	}
	res := &analyze.Prediction{Fit: fit, Projection: sums[0].ProjectWith(fit, o.Ranks, o.Algos)}
	if res.Projection == nil {
		return nil, fmt.Errorf("run %s has no allreduce on the world communicator: nothing to project", o.Runs[0])
	}
	if o.Check != "" {
		m, err := load.Summary(ctx, o.Check)
		if err != nil {
			return nil, err
		}
		if res.Check = analyze.CheckPrediction(m, o.Check, fit); res.Check == nil {
			return nil, fmt.Errorf("--check run %s has no allreduce on the world communicator", o.Check)
		}
	}
	return res, nil
}
