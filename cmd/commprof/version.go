package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/commprof/commprof/internal/iostreams"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func versionString() string {
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok && v == "dev" {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += "+" + s.Value[:12]
			}
		}
	}
	return v
}

func newVersionCmd(ios *iostreams.IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of commprof",
		Long:  help("version"),
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(ios.Out, "commprof %s (%s, %s/%s)\n", versionString(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return err
		},
	}
}
