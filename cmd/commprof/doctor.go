package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/iostreams"
	"github.com/commprof/commprof/load"
	"github.com/commprof/commprof/report"
	"github.com/commprof/commprof/trace"
)

type doctorOptions struct {
	format string
}

func newDoctorCmd(ios *iostreams.IOStreams) *cobra.Command {
	o := &doctorOptions{}
	cmd := &cobra.Command{
		Use:   "doctor RUN",
		Short: "Explain a hung, failed or killed run: which rank is stuck where, and who called what",
		Long: `doctor reads a run (complete, failed, interrupted, killed or still hanging)
and says, for every rank, the call it is blocked in or last made; which ranks
hold the others up (the culprits); where ranks called different things at
the same call of a communicator (op, bytes, dtype, root, reduction op, or a
rank that never called it); and which ranks died.

It reads the ranks' traces, their in-flight state (inflight/ in the run,
which the ranks keep while they run) and run.json. An imported NCCL log is
matched across ranks by communicator and opCount. --format json prints an
object with culprits, ranks and mismatches (docs/doctor.md).

doctor exits 0 whatever it finds; a run it cannot read is an error.`,
		Example: `  commprof doctor runs/mpi-train-20261127-101500
  commprof doctor --format json RUN | jq .culprits`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDoctor(cmd.Context(), ios, o, args[0])
		},
	}
	cmd.Flags().StringVar(&o.format, "format", "text", "text or json")
	return cmd
}

func runDoctor(ctx context.Context, ios *iostreams.IOStreams, o *doctorOptions, dir string) error {
	if o.format != "text" && o.format != "json" {
		return usagef("--format %q: want text or json", o.format)
	}
	d, problems, err := diagnoseRun(ctx, dir)
	if err != nil {
		return err
	}
	for _, p := range problems {
		fmt.Fprintf(ios.ErrOut, "commprof: warning: %v\n", p)
	}
	if o.format == "json" {
		enc := json.NewEncoder(ios.Out)
		enc.SetIndent("", " ")
		return enc.Encode(d)
	}
	return report.WriteDiagnosis(ios.Out, d)
}

// diagnoseRun reads the run in dir and diagnoses it, telling which of its
// ranks on this host have ended while run.json still says running.
func diagnoseRun(ctx context.Context, dir string) (*analyze.Diagnosis, []error, error) {
	in, problems, err := load.DoctorInput(ctx, dir)
	if err != nil {
		return nil, problems, err
	}
	in.Now = time.Now()
	if in.Status == trace.StatusRunning || in.Status == "" {
		in.Gone = goneRanks(in.InFlight)
		// Still running when a rank of it is alive on this host.
		for _, f := range in.InFlight {
			if f.Host == hostname() && !in.Gone[f.Rank] {
				in.Live = true
			}
		}
		if !in.Live && len(in.Gone) > 0 && len(in.Gone) == len(in.InFlight) {
			in.Ended = true
		}
	} else {
		in.Ended = true
	}
	d := analyze.Diagnose(in)
	return &d, problems, nil
}

// goneRanks are the ranks, among those whose in-flight file names this
// host, whose process no longer exists.
func goneRanks(fl []*trace.InFlight) map[int]bool {
	gone := map[int]bool{}
	host := hostname()
	for _, f := range fl {
		if f.Host != host || f.PID <= 0 {
			continue
		}
		if err := syscall.Kill(f.PID, 0); err == syscall.ESRCH {
			gone[f.Rank] = true
		}
	}
	return gone
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// attachDiagnosis gives the summary of a run that did not end well the
// doctor's diagnosis, which stats and report lead with. A complete run is
// not read again for it.
func attachDiagnosis(ctx context.Context, dir string, s *analyze.Summary) {
	if s.Run.Status == trace.StatusComplete {
		return
	}
	d, _, err := diagnoseRun(ctx, dir)
	if err == nil && !d.Healthy() {
		s.Diagnosis = d
	}
}
