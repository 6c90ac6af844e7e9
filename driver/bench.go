package driver

import (
	"context"
	"io"

	"github.com/commprof/commprof/bench"
	"github.com/commprof/commprof/collectives"
	"github.com/commprof/commprof/inject"
	"github.com/commprof/commprof/rankrun"
)

// BenchOptions are one rank's benchmark (commprof bench), its flags
// parsed.
type BenchOptions struct {
	Job         collectives.Job
	Collectives collectives.Config
	Spec        bench.Spec
	Config      map[string]string // run.json's config
	Faults      []inject.Fault
	Algo        string // as the user gave it, for the header
	JSON        bool
	Stdout      io.Writer
	Version     string
}

// Bench runs this rank of commprof bench under the rank runtime; rank 0
// prints the table (or JSON).
func Bench(ctx context.Context, o BenchOptions) error {
	s := o.Spec
	return RunRank(ctx, o.Job, o.Collectives, o.Config, o.Faults, o.Version, func(ctx context.Context, c collectives.Communicator, tools rankrun.Tools) error {
		if tools.Rec != nil {
			s.Mark = tools.Rec.MarkAt
		}
		var rows []bench.Result
		if c.Rank() == 0 && !o.JSON {
			bench.TableHeader(o.Stdout, s, c.Size(), o.Algo, "rank 0's links: "+tools.Links)
		}
		err := bench.Run(ctx, c, s, func(r bench.Result) {
			if c.Rank() != 0 {
				return
			}
			rows = append(rows, r)
			if !o.JSON {
				bench.TableRow(o.Stdout, r)
			}
		})
		if err != nil {
			return err
		}
		switch {
		case c.Rank() != 0:
		case o.JSON:
			return bench.JSON(o.Stdout, rows)
		default:
			bench.TableFooter(o.Stdout, rows)
		}
		return nil
	})
}
