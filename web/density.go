package web

import (
	"context"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/stretch"
	"github.com/commprof/commprof/load"
	"github.com/commprof/commprof/trace"
)

// densityBins is how finely a run's density is known: 4096 bins of its
// span, 32 KiB a run.
const densityBins = 4096

// density is how a run's events spread over its span: how many start in
// each of densityBins equal bins. It sizes a timeline.json window before
// the window is built, since a build holds every event of its window
// until it has picked the ones it sends.
type density struct {
	width  int64   // ns per bin
	counts []int64 // events starting in each bin
}

// density returns the run's density, from the cache when its files have
// not changed. Reading it decodes two columns of every event and holds a
// build slot.
func (s *server) density(ctx context.Context, r *run, sum *analyze.Summary) (*density, error) {
	return s.densities.get(ctx, r.name+"\x00"+r.fp.key, func(ctx context.Context) (*density, error) {
		ctx, release, err := s.build(ctx, "density")
		if err != nil {
			return nil, err
		}
		defer release()
		d := &density{width: max(1, (sum.Run.SpanNS+densityBins)/densityBins), counts: make([]int64, densityBins)}
		// One array per stream, filled from the stream's own goroutine,
		// summed once all are read.
		var perStream [][]int64
		first := sum.Run.FirstNS
		err = load.Events(ctx, r.dir, []string{trace.ColStart}, func(int, int) func(*trace.Batch) {
			counts := make([]int64, densityBins)
			perStream = append(perStream, counts)
			return func(b *trace.Batch) {
				for _, st := range b.Start[:b.Len] {
					counts[min(densityBins-1, max(0, (st-first)/d.width))]++
				}
			}
		})
		if err != nil {
			return nil, err
		}
		for _, counts := range perStream {
			for i, n := range counts {
				d.counts[i] += n
			}
		}
		return d, nil
	})
}

// shrink returns the part of [from, to) (ns since the run's first
// event) around its middle that holds at most about limit events, by
// the density's bins: the whole of it when it holds fewer. Bins that the
// window cuts count whole, so the answer errs on the side of fewer
// events; a single bin holding more than limit is returned cut to the
// window.
func (d *density) shrink(from, to int64, limit int64) (int64, int64) {
	lo, hi := d.bin(from), d.bin(to-1)
	total := int64(0)
	for i := lo; i <= hi; i++ {
		total += d.counts[i]
	}
	if total <= limit {
		return from, to
	}
	a, b := stretch.Around(d.counts, lo, hi+1, d.bin(from+(to-from)/2), limit)
	return max(from, int64(a)*d.width), min(to, int64(b)*d.width)
}

func (d *density) bin(t int64) int {
	return int(min(int64(len(d.counts)-1), max(0, t/d.width)))
}
