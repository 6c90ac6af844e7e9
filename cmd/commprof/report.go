package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/commprof/commprof/collectives"
	"github.com/commprof/commprof/driver"
	"github.com/commprof/commprof/internal/atomicfile"
	"github.com/commprof/commprof/internal/iostreams"
	"github.com/commprof/commprof/internal/rundir"
	"github.com/commprof/commprof/internal/units"
	"github.com/commprof/commprof/load"
	"github.com/commprof/commprof/report"
)

type reportOptions struct {
	out    string
	open   bool
	detail int
	bins   int
	model  string
	memory string
}

func newReportCmd(ios *iostreams.IOStreams) *cobra.Command {
	o := &reportOptions{}
	cmd := &cobra.Command{
		Use:   "report RUN",
		Short: "Write a run's self-contained HTML report",
		Long:  help("report"),
		Example: `  commprof report runs/train-4r-20261122-101500
  commprof report RUN -o /tmp/run.html --open`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReport(cmd.Context(), ios, o, args[0])
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.out, "output", "o", "", "HTML file to write (default RUN/report.html)")
	f.BoolVar(&o.open, "open", false, "open the report in the default browser")
	f.IntVar(&o.detail, "detail", report.DefaultDetail, "most events the timeline shows one by one")
	f.StringVar(&o.model, "model", "", "a model file from commprof calibrate, for the model and projection")
	f.IntVar(&o.bins, "bins", 0, "occupancy bins across the run in the timeline (0: 1500, fewer for more than 40 ranks)")
	f.StringVar(&o.memory, "timeline-memory", fmt.Sprintf("%dM", report.DefaultTimelineMemory>>20), "memory for the events the timeline is built from, read with the summary; a run whose events need more is read a second time (K, M, G suffixes)")
	return cmd
}

func runReport(ctx context.Context, ios *iostreams.IOStreams, o *reportOptions, dir string) error {
	stdout, stderr := ios.Out, ios.ErrOut
	if o.detail < 0 || o.bins < 0 || o.bins > 100_000 {
		return usagef("--detail %d --bins %d: want --detail 0 or more and --bins from 0 (automatic) to 100000", o.detail, o.bins)
	}
	memory, err := collectives.ParseSize(o.memory)
	if err != nil || memory < 0 {
		return usagef("--timeline-memory %q: want a size such as 64M or 1G", o.memory)
	}
	start := time.Now()
	po := report.RunPageOptions{Timeline: report.TimelineOptions{Detail: max(o.detail, 1), Bins: o.bins}, Memory: max(memory, 1)}
	if o.model != "" {
		m, err := driver.ReadModel(o.model)
		if err != nil {
			return err
		}
		f := m.Fit
		f.Source = o.model
		po.Fit = &f
	}
	// One read for the summary and the timeline's events, unless they
	// need more than --timeline-memory.
	page, err := report.LoadRunPage(ctx, dir, po)
	if err != nil {
		return err
	}
	s := page.Summary
	load.AttachDiagnosis(ctx, dir, s)
	for _, p := range s.Problems {
		fmt.Fprintf(stderr, "commprof: warning: %s\n", p)
	}
	out := o.out
	if out == "" {
		out = filepath.Join(dir, rundir.ReportFile)
	}
	n, err := atomicfile.Write(ctx, out, page.Write)
	if err != nil {
		return fmt.Errorf("writing the report %s: %w", out, err)
	}
	fmt.Fprintf(stdout, "wrote %s: %s, %d events (%d in the timeline's detail), in %s\n", out, units.Bytes(n), s.Run.Events,
		len(page.Timeline.Events.Rank), time.Since(start).Round(time.Millisecond))
	if page.Reread {
		fmt.Fprintf(stdout, "the timeline's events needed more than --timeline-memory %s, so the run was read a second time for them\n", o.memory)
	}
	if o.open {
		// The report is written: a machine without a browser (a
		// server, a container) is told where it is, and the command
		// succeeds, so that `report --open && ...` goes on.
		if err := openBrowser(out); err != nil {
			fmt.Fprintf(stderr, "commprof: %v\n", err)
		}
		return nil
	}
	fmt.Fprintf(stdout, "open it in a browser, or: commprof report %s --open\n", dir)
	return nil
}

// openBrowser opens path with $BROWSER or the desktop's opener, and says
// so when none could, naming the file: an opener that exits with an error
// within a few seconds (xdg-open on a machine without a browser or a
// display) failed.
func openBrowser(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	var cands []string
	if b := os.Getenv("BROWSER"); b != "" {
		cands = append(cands, b)
	}
	if runtime.GOOS == "darwin" {
		cands = append(cands, "open")
	} else {
		cands = append(cands, "xdg-open", "sensible-browser")
	}
	var failed []string
	for _, c := range cands {
		p, err := exec.LookPath(c)
		if err != nil {
			continue
		}
		cmd := exec.Command(p, abs)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", c, err))
			continue
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err == nil {
				return nil
			}
			msg := strings.TrimSpace(out.String())
			if i := strings.IndexByte(msg, '\n'); i >= 0 {
				msg = msg[:i]
			}
			failed = append(failed, fmt.Sprintf("%s: %v %s", c, err, msg))
		case <-time.After(3 * time.Second):
			return nil // still running: a browser that stays in the foreground
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("--open: could not open a browser (%s); open the report yourself: %s", strings.Join(failed, "; "), abs)
	}
	return fmt.Errorf("--open: no browser found (tried %v; set $BROWSER); open the report yourself: %s", cands, abs)
}
