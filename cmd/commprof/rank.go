package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/commprof/commprof/collectives"
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

// injectFlag adds --inject to a command's flags.
func injectFlag(cmd *cobra.Command, specs *[]string) {
	cmd.Flags().StringArrayVar(specs, "inject", nil,
		"inject a fault, e.g. delay:rank=2,dur=20ms,every=1 (repeatable; docs/inject.md)")
}
