package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/atomicfile"
	"github.com/commprof/commprof/internal/iostreams"
	"github.com/commprof/commprof/internal/units"
	"github.com/commprof/commprof/load"
	"github.com/commprof/commprof/report"
)

type diffOptions struct {
	format string
	limit  int
	all    bool
	// limitSet says --limit was given: with --all it still cuts the table.
	limitSet bool
	html     string
}

func newDiffCmd(ios *iostreams.IOStreams) *cobra.Command {
	o := &diffOptions{}
	cmd := &cobra.Command{
		Use:   "diff RUN_A RUN_B",
		Short: "Compare two runs: the outcomes first, then the changes that move the time per sample most",
		Long:  help("diff"),
		Example: `  commprof diff runs/train-bs64 runs/train-bs512
  commprof diff A B --all
  commprof diff A B --format json | jq '.changes[:5]'`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.limitSet = cmd.Flags().Changed("limit")
			return runDiff(cmd.Context(), ios, o, args[0], args[1])
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.format, "format", "table", "table or json")
	f.IntVar(&o.limit, "limit", 15, "print at most this many changes with a verdict in the table (0: all)")
	f.BoolVar(&o.all, "all", false, "print every figure, within noise and without a direction too (and all of them, unless --limit is given)")
	f.StringVar(&o.html, "html", "", "also write the diff as a self-contained HTML report to this file")
	return cmd
}

func runDiff(ctx context.Context, ios *iostreams.IOStreams, o *diffOptions, dirA, dirB string) error {
	stdout, stderr := ios.Out, ios.ErrOut
	if o.format != "table" && o.format != "json" {
		return usagef("--format %q: want table or json", o.format)
	}
	if o.limit < 0 {
		return usagef("--limit %d: want 0 or more", o.limit)
	}
	a, err := load.Summary(ctx, dirA)
	if err != nil {
		return err
	}
	b, err := load.Summary(ctx, dirB)
	if err != nil {
		return err
	}
	for _, s := range []*analyze.Summary{a, b} {
		for _, p := range s.Problems {
			fmt.Fprintf(stderr, "commprof: warning: %s\n", p)
		}
	}
	d := analyze.Compare(a, b)
	if o.html != "" {
		n, err := atomicfile.Write(ctx, o.html, func(w io.Writer) error { return report.WriteDiffHTML(w, a, b, d) })
		if err != nil {
			return fmt.Errorf("writing the diff report %s: %w", o.html, err)
		}
		fmt.Fprintf(stderr, "wrote %s (%s)\n", o.html, units.Bytes(n))
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	if o.format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", " ")
		return enc.Encode(d)
	}
	report.WriteDiffOverview(w, d)
	if len(d.Outcomes) > 0 {
		ot := report.OutcomeTable(d)
		fmt.Fprintf(w, "\n%s\n", ot.Title)
		if err := ot.WriteText(w); err != nil {
			return err
		}
	}
	limit := o.limit
	if o.all && !o.limitSet {
		limit = 0
	}
	for _, t := range report.DiffTables(d, limit, !o.all) {
		fmt.Fprintf(w, "\n%s\n", t.Title)
		if len(t.Rows) == 0 {
			fmt.Fprintln(w, "no change larger than the runs' own variation")
		} else if err := t.WriteText(w); err != nil {
			return err
		}
		if t.Note != "" {
			fmt.Fprintln(w, t.Note)
		}
	}
	return nil
}
