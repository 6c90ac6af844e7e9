// Command genschema writes interpose/pmpi/c/schema.h (see package
// schemagen). Run by go generate in interpose/pmpi.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/commprof/commprof/interpose/pmpi/internal/schemagen"
)

func main() {
	out := flag.String("o", "c/schema.h", "output file")
	flag.Parse()
	src, err := schemagen.Generate()
	if err == nil {
		err = os.WriteFile(*out, src, 0o644)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "genschema: %v\n", err)
		os.Exit(1)
	}
}
