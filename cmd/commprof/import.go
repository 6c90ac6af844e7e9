package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/commprof/commprof/importers"
	"github.com/commprof/commprof/internal/iostreams"
	"github.com/commprof/commprof/internal/rundir"
	"github.com/commprof/commprof/internal/units"
	"github.com/commprof/commprof/trace"
)

type importOptions struct {
	format string
	out    string
	name   string
	codec  string
	op     string
	force  bool
}

func newImportCmd(ios *iostreams.IOStreams) *cobra.Command {
	o := &importOptions{}
	cmd := &cobra.Command{
		Use:   "import [--format FORMAT] [--out DIR] FILE_OR_DIR...",
		Short: "Turn traces written by other tools into a run",
		Long:  help("import"),
		Example: `  commprof import timeline.json --out runs/hvd
  commprof import --format kineto profiler_traces/ --out runs/step12
  commprof import all_reduce_perf.out --op allreduce --out runs/nccl-tests`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runImport(cmd.Context(), ios, o, args)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.format, "format", "auto", "auto, "+strings.Join(importers.Formats, ", "))
	f.StringVarP(&o.out, "out", "o", "", "run directory to write; must not exist or be empty (default runs/NAME-YYYYMMDD-HHMMSS)")
	f.BoolVar(&o.force, "force", false, "replace the run already in --out")
	f.StringVar(&o.name, "name", "", "run name (default from the first file's name)")
	f.StringVar(&o.codec, "codec", "zstd", "trace compression: zstd, lz4 or none")
	f.StringVar(&o.op, "op", "", "nccl-tests only: the collective, when the output does not name it")
	return cmd
}

func runImport(ctx context.Context, ios *iostreams.IOStreams, o *importOptions, args []string) error {
	stdout, stderr := ios.Out, ios.ErrOut
	if len(args) == 0 {
		return usagef("import needs at least one file or directory, e.g. commprof import timeline.json --out runs/hvd")
	}
	format, err := importers.ParseFormat(o.format)
	if err != nil {
		return usageError{Err: fmt.Errorf("--format: %w", err)}
	}
	codec, err := trace.ParseCodec(o.codec)
	if err != nil {
		return usageError{Err: fmt.Errorf("--codec: %w", err)}
	}
	name := o.name
	if name == "" {
		name = importers.DefaultName(args[0])
	}
	started := time.Now()
	out := o.out
	if out == "" {
		out = rundir.DefaultDir(name, started)
	}
	prog := &importProgress{w: stderr, start: started, done: map[string]int64{}, total: map[string]int64{}}
	res, err := importers.Import(ctx, args, importers.Options{
		Format: format, Out: out, Force: o.force, Name: name, Codec: codec, Op: o.op, CommprofVersion: versionString(),
		Command: append([]string{"commprof", "import"}, args...), Progress: prog.update,
	})
	prog.finish()
	if res == nil {
		return err
	}
	m := res.Manifest
	files := strings.Join(res.Files, ", ")
	if len(res.Files) > 3 {
		files = fmt.Sprintf("%d files (%s, ...)", len(res.Files), strings.Join(res.Files[:2], ", "))
	}
	fmt.Fprintf(stdout, "imported %s (%s, %s) into %s: %d ranks, %d events, in %s\n", files, res.Format,
		units.Bytes(res.InputBytes), res.Dir, res.Ranks, res.Events, time.Since(started).Round(time.Millisecond))
	for _, s := range res.Summary {
		fmt.Fprintf(stdout, "  %s\n", s)
	}
	if src := m.Source; src != nil {
		if len(src.Missing) > 0 {
			fmt.Fprintln(stdout, "not in the input (run.json source.missing):")
			for _, s := range src.Missing {
				fmt.Fprintf(stdout, "  - %s\n", s)
			}
		}
		if len(src.Skipped) > 0 {
			keys := make([]string, 0, len(src.Skipped))
			for k := range src.Skipped {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			fmt.Fprintln(stdout, "skipped input records (run.json source.skipped):")
			for _, k := range keys {
				fmt.Fprintf(stdout, "  - %d %s\n", src.Skipped[k], k)
			}
		}
	}
	if m.Status != trace.StatusComplete {
		fmt.Fprintf(stderr, "commprof: warning: %s\n", m.Error)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "next: commprof report %s\n", res.Dir)
	return nil
}

// importProgress prints how far a long import is, at most once a second
// and only once it has taken more than two.
type importProgress struct {
	w       io.Writer
	start   time.Time
	last    time.Time
	done    map[string]int64
	total   map[string]int64
	printed bool
}

func (p *importProgress) update(file string, done, total int64) {
	p.done[file], p.total[file] = done, total
	now := time.Now()
	if now.Sub(p.start) < 2*time.Second || now.Sub(p.last) < time.Second {
		return
	}
	p.last = now
	var d, t int64
	for f, n := range p.done {
		d += n
		t += p.total[f]
	}
	if t < d { // a pipe or FIFO has no size
		fmt.Fprintf(p.w, "\rimporting %s: %s read   ", filepath.Base(file), units.Bytes(d))
	} else {
		fmt.Fprintf(p.w, "\rimporting %s: %s (%s of %s)   ", filepath.Base(file), units.Percent(float64(d)/float64(max(t, 1)), 0), units.Bytes(d), units.Bytes(t))
	}
	p.printed = true
}

func (p *importProgress) finish() {
	if p.printed {
		fmt.Fprintln(p.w)
	}
}
