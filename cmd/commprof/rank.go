package main

import (
	"context"
	"errors"
	"os"

	"github.com/spf13/cobra"

	"github.com/commprof/commprof/collectives"
	"github.com/commprof/commprof/inject"
	"github.com/commprof/commprof/internal/envnames"
	"github.com/commprof/commprof/rankrun"
)

// thisRank is rankrun.Here with its errors in --ranks as usage errors.
func thisRank(ranks int, ranksSet bool) (collectives.Job, bool, error) {
	job, isRank, err := rankrun.Here(ranks, ranksSet)
	if re := (rankrun.RanksError("")); errors.As(err, &re) {
		err = usageError{err}
	}
	return job, isRank, err
}

// runRank runs a rank's program under rankrun, its fault plan checked
// against the job as a usage error.
func runRank(ctx context.Context, job collectives.Job, cfg collectives.Config, config map[string]string, faults []inject.Fault, program func(context.Context, collectives.Communicator, rankrun.Tools) error) error {
	if err := inject.Check(faults, job.Size); err != nil {
		return usageError{err}
	}
	return rankrun.Run(ctx, rankrun.Spec{Job: job, Collectives: cfg, Config: config, Faults: faults, Version: versionString()}, program)
}

// injectFlag adds --inject to a command's flags.
func injectFlag(cmd *cobra.Command, specs *[]string) {
	cmd.Flags().StringArrayVar(specs, "inject", nil,
		"inject a fault, e.g. delay:rank=2,dur=20ms,every=1 (repeatable; docs/inject.md)")
}

// faultsOf parses --inject values and COMMPROF_INJECT.
func faultsOf(specs []string) ([]inject.Fault, error) {
	var out []inject.Fault
	for _, s := range append([]string{os.Getenv(envnames.Inject)}, specs...) {
		fs, err := inject.Parse(s)
		if err != nil {
			if s == os.Getenv(envnames.Inject) {
				return nil, usagef("%s: %v", envnames.Inject, err)
			}
			return nil, usagef("--inject: %v", err)
		}
		out = append(out, fs...)
	}
	return out, nil
}
