package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/iostreams"
	"github.com/commprof/commprof/internal/units"
	"github.com/commprof/commprof/load"
)

type benchReadOptions struct {
	columns string
	repeat  int
	json    bool
}

func newBenchReadCmd(ios *iostreams.IOStreams) *cobra.Command {
	o := &benchReadOptions{}
	cmd := &cobra.Command{
		Use:   "read RUN",
		Short: "Measure how fast a recorded run is read back",
		Long:  help("bench-read"),
		Example: `  commprof bench read runs/bench-allreduce-20261122-010046
  commprof bench read RUN --columns all --repeat 5`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBenchRead(cmd.Context(), ios.Out, o, args[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.columns, "columns", "summary", "columns to decode: summary or all")
	f.IntVar(&o.repeat, "repeat", 3, "number of reads")
	f.BoolVar(&o.json, "json", false, "print the results as JSON")
	return cmd
}

// benchReadResult is one read of bench read's, as --json prints it.
type benchReadResult struct {
	Seconds      float64 `json:"seconds"`
	EventsPerSec float64 `json:"events_per_sec"`
	DiskMBPerSec float64 `json:"disk_mb_per_sec"`
}

func runBenchRead(ctx context.Context, stdout io.Writer, o *benchReadOptions, dir string) error {
	var cols []string
	switch o.columns {
	case "summary":
		cols = analyze.SummaryColumns()
	case "all":
	default:
		return usagef("--columns %q: want summary or all", o.columns)
	}
	if o.repeat < 1 {
		return usagef("--repeat %d: want at least 1", o.repeat)
	}
	var runs []benchReadResult
	var count load.ReadCount
	for range o.repeat {
		start := time.Now()
		c, err := load.Read(ctx, dir, cols)
		if err != nil {
			return err
		}
		sec := time.Since(start).Seconds()
		count = c
		runs = append(runs, benchReadResult{Seconds: sec, EventsPerSec: float64(c.Events) / sec, DiskMBPerSec: float64(c.DiskBytes) / 1e6 / sec})
	}
	best := slices.MaxFunc(runs, func(a, b benchReadResult) int { return cmp.Compare(a.EventsPerSec, b.EventsPerSec) })
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", " ")
		return enc.Encode(map[string]any{"run": dir, "columns": o.columns, "streams": count.Streams, "events": count.Events,
			"disk_bytes": count.DiskBytes, "cut_streams": count.Cut, "reads": runs, "best": best})
	}
	fmt.Fprintf(stdout, "# %s: %d streams, %d events, %s on disk; columns: %s\n", dir, count.Streams, count.Events,
		units.Bytes(count.DiskBytes), o.columns)
	if count.Cut > 0 {
		fmt.Fprintf(stdout, "# %d streams were cut; their complete batches are counted\n", count.Cut)
	}
	fmt.Fprintf(stdout, "%6s %10s %14s %12s\n", "read", "seconds", "events/s", "disk MB/s")
	for i, r := range runs {
		fmt.Fprintf(stdout, "%6d %10.3f %14.0f %12.1f\n", i+1, r.Seconds, r.EventsPerSec, r.DiskMBPerSec)
	}
	fmt.Fprintf(stdout, "%6s %10.3f %14.0f %12.1f\n", "best", best.Seconds, best.EventsPerSec, best.DiskMBPerSec)
	return nil
}
