package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/iostreams"
	"github.com/commprof/commprof/load"
	"github.com/commprof/commprof/report"
)

type statsOptions struct {
	by     string
	format string
}

func newStatsCmd(ios *iostreams.IOStreams) *cobra.Command {
	o := &statsOptions{}
	cmd := &cobra.Command{
		Use:   "stats RUN",
		Short: "Summarize a run: collectives, ranks, sizes, steps, traffic",
		Long:  help("stats"),
		Example: `  commprof stats runs/train-4r-20261122-101500
  commprof stats RUN --by rank
  commprof stats RUN --format json | jq .headline`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runStats(cmd.Context(), ios, o, args[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.by, "by", "op", "table to print: "+strings.Join(report.Views, ", "))
	f.StringVar(&o.format, "format", "table", "table, json or csv")
	return cmd
}

func runStats(ctx context.Context, ios *iostreams.IOStreams, o *statsOptions, dir string) error {
	stdout, stderr := ios.Out, ios.ErrOut
	switch o.format {
	case "table", "json", "csv":
	default:
		return usagef("--format %q: want table, json or csv", o.format)
	}
	if _, err := report.View(&analyze.Summary{}, o.by, false); err != nil {
		return usagef("--by: %v", err)
	}
	s, err := load.Summary(ctx, dir)
	if err != nil {
		return err
	}
	for _, p := range s.Problems {
		fmt.Fprintf(stderr, "commprof: warning: %s\n", p)
	}
	load.AttachDiagnosis(ctx, dir, s)
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	switch o.format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", " ")
		return enc.Encode(s)
	case "csv":
		t, _ := report.View(s, o.by, true)
		return t.WriteCSV(w)
	}
	if !s.Diagnosis.Healthy() {
		_ = report.WriteDiagnosis(w, s.Diagnosis)
		fmt.Fprintln(w)
	}
	report.WriteOverview(w, s)
	t, _ := report.View(s, o.by, false)
	fmt.Fprintf(w, "\n%s\n", t.Title)
	return t.WriteText(w)
}
