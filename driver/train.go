package driver

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"sort"

	"github.com/commprof/commprof/collectives"
	"github.com/commprof/commprof/inject"
	"github.com/commprof/commprof/internal/units"
	"github.com/commprof/commprof/rankrun"
	"github.com/commprof/commprof/trace"
	"github.com/commprof/commprof/trainer"
)

// TrainOptions are one rank's training job (commprof train), its flags
// parsed and its data loaded.
type TrainOptions struct {
	Job         collectives.Job
	Collectives collectives.Config
	Trainer     trainer.Config
	Config      map[string]string // run.json's config, which every rank must agree on
	Faults      []inject.Fault
	Train, Test *trainer.Dataset
	Data        string // the data's name, for the first line
	Quiet, TTY  bool   // no progress bar; stderr is a terminal
	Stdout      io.Writer
	Stderr      io.Writer
	Version     string
}

// Train runs this rank of the reference trainer under the rank runtime:
// it checks that every rank has the same configuration, trains, prints
// each epoch on rank 0 and leaves the final figures in run.json.
func Train(ctx context.Context, o TrainOptions) error {
	config := o.Config
	return RunRank(ctx, o.Job, o.Collectives, config, o.Faults, o.Version, func(ctx context.Context, c collectives.Communicator, tools rankrun.Tools) error {
		if err := agree(ctx, c, config); err != nil {
			return err
		}
		var rec trainer.Recorder
		if tools.Rec != nil {
			rec = tools.Rec
		}
		tr, err := trainer.New(ctx, c, rec, o.Trainer, o.Train, o.Test)
		if err != nil {
			return err
		}
		rank0 := c.Rank() == 0
		if rank0 {
			fmt.Fprintf(o.Stdout, "# commprof train: %s (%d parameters), %d ranks × batch %d = global batch %d, %d steps/epoch, data %s\n",
				tr.Model.Describe(), len(tr.Model.Weights()), c.Size(), o.Trainer.BatchSize, o.Trainer.BatchSize*c.Size(), tr.StepsPerEpoch(), o.Data)
		}
		var progress io.Writer
		if rank0 && !o.Quiet && rankrun.Progress(o.TTY) {
			progress = o.Stderr
		}
		var last trainer.Epoch
		err = tr.Run(ctx, progress, func(e trainer.Epoch) {
			last = e
			if rank0 {
				fmt.Fprintf(o.Stdout, "epoch %d  loss %.4f  train acc %.4f  test acc %.4f  %.0f images/s  lr %.4g  waiting for gradients %s\n",
					e.Epoch, e.Loss, e.TrainAcc, e.TestAcc, float64(e.Images)/e.Seconds, e.LR, units.Percent(e.CommShare, 0))
			}
		})
		if err != nil {
			return err
		}
		tools.SetMetric(trace.MetricTestAccuracy, last.TestAcc)
		tools.SetMetric(trace.MetricTrainAccuracy, last.TrainAcc)
		tools.SetMetric(trace.MetricLoss, last.Loss)
		tools.SetMetric(trace.MetricImagesPerSecond, float64(last.Images)/last.Seconds)
		return nil
	})
}

// RunRank runs a rank's program under rankrun, its fault plan checked
// against the job as a usage error.
func RunRank(ctx context.Context, job collectives.Job, cfg collectives.Config, config map[string]string, faults []inject.Fault, version string, program func(context.Context, collectives.Communicator, rankrun.Tools) error) error {
	if err := inject.Check(faults, job.Size); err != nil {
		return UsageError{Err: err}
	}
	return rankrun.Run(ctx, rankrun.Spec{Job: job, Collectives: cfg, Config: config, Faults: faults, Version: version}, program)
}

// agree checks that every rank runs with the same configuration.
func agree(ctx context.Context, c collectives.Communicator, config map[string]string) error {
	keys := make([]string, 0, len(config))
	for k := range config {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := fnv.New64a()
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%s;", k, config[k])
	}
	v := int64(h.Sum64() >> 1)
	both := []int64{v, -v}
	if err := c.AllReduce(ctx, collectives.Int64s(both), collectives.Max); err != nil {
		return fmt.Errorf("comparing configurations: %w", err)
	}
	if both[0] != v || both[1] != -v {
		return fmt.Errorf("the ranks were started with different training configurations; every rank must get the same flags")
	}
	return nil
}
