package main

import (
	"github.com/spf13/cobra"

	"github.com/commprof/commprof/driver"
)

// stallFlags adds record's --stall-after and --on-stall.
func stallFlags(cmd *cobra.Command, o *driver.StallOptions) {
	f := cmd.Flags()
	f.DurationVar(&o.After, "stall-after", driver.DefaultStallAfter, "report a stall when no rank has completed a call for this long while one waits in a call (0: never)")
	f.StringVar(&o.OnStall, "on-stall", "report", "what to do on a stall: report (print it and write it into the run; the job goes on) or abort (end the job after the report)")
}
