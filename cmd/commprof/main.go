// Command commprof records and analyzes the communication of distributed
// training. See docs/cli.md.
package main

import (
	"os"

	"github.com/commprof/commprof/internal/iostreams"
)

func main() { os.Exit(run(os.Args[1:], iostreams.System())) }
