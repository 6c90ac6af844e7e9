// Command synthrun writes a synthetic run for measurements at scale:
//
//	go run ./internal/synthrun/cmd/synthrun -ranks 512 -late 17,300 -out /tmp/s512
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/commprof/commprof/internal/synthrun"
)

func main() {
	var o synthrun.Options
	out := flag.String("out", "", "run directory to write (new or empty)")
	late := flag.String("late", "", "ranks held back before every allreduce, comma-separated")
	lateNS := flag.Int64("late-ns", 2_000_000, "how long the late ranks are held back, ns")
	flag.IntVar(&o.Ranks, "ranks", 512, "ranks")
	flag.IntVar(&o.RanksPerHost, "per-host", 8, "ranks per host")
	flag.IntVar(&o.Steps, "steps", 10, "training steps")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "synthrun: -out is required")
		os.Exit(2)
	}
	o.Late = map[int]int64{}
	for _, f := range strings.Split(*late, ",") {
		if f == "" {
			continue
		}
		r, err := strconv.Atoi(f)
		if err != nil {
			fmt.Fprintf(os.Stderr, "synthrun: -late %q: %v\n", f, err)
			os.Exit(2)
		}
		o.Late[r] = *lateNS
	}
	if err := synthrun.Write(*out, o); err != nil {
		fmt.Fprintln(os.Stderr, "synthrun:", err)
		os.Exit(1)
	}
}
