package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/atomicfile"
	"github.com/commprof/commprof/internal/self"
	"github.com/commprof/commprof/load"
)

// CalibrateOptions say what Calibrate measures. The sizes are as the
// user gave them (Min, Max: 64K, 16M) and parsed (MinBytes, MaxBytes).
type CalibrateOptions struct {
	Ranks              []int    // rank counts, each 2 or more
	Algos              []string // allreduce algorithms
	Min, Max           string
	MinBytes, MaxBytes int64
	Factor             int64
	Iters              int
	Out                string // the model file to write
	Keep               string // keep the runs in this directory ("": a temporary one, removed)
	Version            string // commprof's version, for the model file
}

// Calibrate records commprof bench allreduce on each rank count with each
// algorithm (progress lines to progress), fits the alpha-beta-gamma model
// to every run together and writes it to o.Out as a model file.
func Calibrate(ctx context.Context, o CalibrateOptions, progress io.Writer) (*analyze.ModelFile, error) {
	dir := o.Keep
	if dir == "" {
		tmp, err := os.MkdirTemp("", "commprof-calibrate-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var sums []*analyze.Summary
	var runs []string
	var cons []analyze.Contention
	for _, n := range o.Ranks {
		for _, a := range o.Algos {
			run := filepath.Join(dir, fmt.Sprintf("allreduce-%s-%dr", a, n))
			fmt.Fprintf(progress, "calibrate: %d ranks, %s, %s to %s ...\n", n, a, o.Min, o.Max)
			args := []string{"record", "--ranks", strconv.Itoa(n), "--out", run, "--", "bench", "allreduce",
				"--min", o.Min, "--max", o.Max, "--factor", strconv.FormatInt(o.Factor, 10), "--iters", strconv.Itoa(o.Iters), "--algo", a}
			if err := self.Run(ctx, args, io.Discard); err != nil {
				return nil, fmt.Errorf("%d ranks, %s: %w", n, a, err)
			}
			s, err := load.Summary(ctx, run)
			if err != nil {
				return nil, err
			}
			sums = append(sums, s)
			runs = append(runs, run)
			cons = append(cons, s.Run.Contention)
		}
	}
	fit := analyze.PooledFit(sums...)
	if !fit.Usable {
		return nil, fmt.Errorf("the measurements gave no usable model: %s", fit.Reason)
	}
	fit.Source = "calibration"
	host, _ := os.Hostname()
	m := &analyze.ModelFile{Format: analyze.ModelFormat, Version: 1, Fit: fit, Host: host, Contention: cons, Runs: runs,
		Algos: o.Algos, MinBytes: o.MinBytes, MaxBytes: o.MaxBytes, Created: time.Now().UTC().Format(time.RFC3339), CommprofVersion: o.Version}
	if o.Keep == "" {
		m.Runs = nil
	}
	b, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return nil, err
	}
	if _, err := atomicfile.Write(ctx, o.Out, func(w io.Writer) error { _, err := w.Write(append(b, '\n')); return err }); err != nil {
		return nil, fmt.Errorf("writing %s: %w", o.Out, err)
	}
	return m, nil
}

// ReadModel reads the model file (one commprof calibrate wrote) that a
// --model flag names: a file that cannot be read is a UsageError.
func ReadModel(path string) (*analyze.ModelFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, Usagef("--model: %v", err)
	}
	return analyze.ParseModel(path, b)
}
