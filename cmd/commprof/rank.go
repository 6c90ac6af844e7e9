package main

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/commprof/commprof/collectives"
	"github.com/commprof/commprof/inject"
	"github.com/commprof/commprof/rankrun"
)

// thisRank is rankrun.Here with its errors in --ranks as usage errors.
func thisRank(ranks int, ranksSet bool) (collectives.Job, bool, error) {
	job, isRank, err := rankrun.Here(ranks, ranksSet)
	if re := (rankrun.RanksError("")); errors.As(err, &re) {
		err = usageError{Err: err}
	}
	return job, isRank, err
}

// runRank runs a rank's program under rankrun, its fault plan checked
// against the job as a usage error.
func runRank(ctx context.Context, job collectives.Job, cfg collectives.Config, config map[string]string, faults []inject.Fault, program func(context.Context, collectives.Communicator, rankrun.Tools) error) error {
	if err := inject.Check(faults, job.Size); err != nil {
		return usageError{Err: err}
	}
	return rankrun.Run(ctx, rankrun.Spec{Job: job, Collectives: cfg, Config: config, Faults: faults, Version: versionString()}, program)
}

// injectFlag adds --inject to a command's flags.
func injectFlag(cmd *cobra.Command, specs *[]string) {
	cmd.Flags().StringArrayVar(specs, "inject", nil,
		"inject a fault, e.g. delay:rank=2,dur=20ms,every=1 (repeatable; docs/inject.md)")
}
