package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/commprof/commprof/collectives"
	"github.com/commprof/commprof/driver"
	"github.com/commprof/commprof/inject"
	"github.com/commprof/commprof/internal/iostreams"
	"github.com/commprof/commprof/rankrun"
	"github.com/commprof/commprof/trace"
	"github.com/commprof/commprof/trainer"
)

type trainOptions struct {
	argv         []string
	ranks        int
	model        string
	hidden       string
	batch        int
	epochs       int
	lr           float64
	momentum     float64
	scaling      string
	warmup       float64
	lrBase       int
	data         string
	synthetic    int
	seed         uint64
	bucketMB     float64
	overlap      bool
	algo         string
	optimizer    string
	decay        string
	sync         string
	servers      int
	quiet        bool
	inject       []string
	stdout, errw io.Writer
	tty          bool // stderr is a terminal
}

func newTrainCmd(argv []string, ios *iostreams.IOStreams) *cobra.Command {
	o := &trainOptions{argv: argv}
	cmd := &cobra.Command{
		Use:   "train",
		Short: "Train the reference data-parallel model (an MLP on 28x28 images)",
		Long:  help("train"),
		Example: `  commprof record --ranks 4 -- train
  commprof train --ranks 2 --data /usr/share/datasets/fashion-mnist --epochs 5`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.stdout, o.errw, o.tty = ios.Out, ios.ErrOut, ios.IsStderrTTY()
			return runTrain(cmd.Context(), o, cmd.Flags().Changed("ranks"))
		},
	}
	f := cmd.Flags()
	f.IntVarP(&o.ranks, "ranks", "n", 4, "local ranks to start (ignored under an external launcher)")
	f.StringVar(&o.model, "model", "mlp", "mlp, or cnn (conv 3x3x32, conv 3x3x64, max-pool, dropout, dense 128, dropout, dense 10)")
	f.StringVar(&o.hidden, "hidden", "256,128", "hidden layer sizes of the MLP, comma-separated")
	f.IntVar(&o.batch, "batch-size", 64, "images per rank per step")
	f.IntVar(&o.epochs, "epochs", 3, "passes over the training set")
	f.Float64Var(&o.lr, "lr", 0.05, "learning rate for one rank")
	f.Float64Var(&o.momentum, "momentum", 0.9, "SGD momentum (Adam's beta1)")
	f.StringVar(&o.optimizer, "optimizer", "sgd", "sgd (with momentum) or adam")
	f.StringVar(&o.decay, "decay", "none", "learning-rate decay after warm-up: none or cosine")
	f.StringVar(&o.scaling, "lr-scaling", "none", "scale the learning rate with the global batch: none, linear or sqrt")
	f.IntVar(&o.lrBase, "lr-base-batch", 0, "the global batch --lr is for; --lr-scaling multiplies it by (global batch / this) or its square root (default: one rank's batch, so the factor is the rank count)")
	f.Float64Var(&o.warmup, "warmup-epochs", 0, "ramp the learning rate up to the scaled one over this many epochs")
	f.StringVar(&o.data, "data", "", "directory of MNIST-format IDX files (default: the embedded synthetic set)")
	f.IntVar(&o.synthetic, "synthetic-size", 20000, "training images of the synthetic set (plus a sixth as many test images)")
	f.Uint64Var(&o.seed, "seed", 1, "seed of the initial weights, the synthetic set and the shuffling")
	f.Float64Var(&o.bucketMB, "bucket-mb", 1, "gradient allreduce bucket size, MiB")
	f.BoolVar(&o.overlap, "overlap", true, "overlap each bucket's allreduce with the rest of backward")
	f.StringVar(&o.algo, "algo", "auto", "allreduce algorithm: auto, ring, recursive_doubling, rabenseifner, tree")
	f.StringVar(&o.sync, "sync", "allreduce", "gradient synchronisation: allreduce, or ps (parameter server)")
	f.IntVar(&o.servers, "servers", 1, "with --sync ps, how many ranks serve a shard of the parameters")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "print only the final figures")
	injectFlag(cmd, &o.inject)
	return cmd
}

func (o *trainOptions) config() (trainer.Config, collectives.Config, error) {
	var cfg trainer.Config
	for _, h := range strings.Split(o.hidden, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(h))
		if err != nil {
			return cfg, collectives.Config{}, usagef("--hidden %q: want sizes such as 256,128", o.hidden)
		}
		cfg.Hidden = append(cfg.Hidden, n)
	}
	cfg.BatchSize, cfg.Epochs, cfg.LR, cfg.Momentum = o.batch, o.epochs, o.lr, o.momentum
	cfg.LRScaling, cfg.LRBaseBatch, cfg.WarmupEpochs, cfg.Seed, cfg.Overlap = o.scaling, o.lrBase, o.warmup, o.seed, o.overlap
	cfg.BucketBytes = int(o.bucketMB * (1 << 20))
	cfg.Sync, cfg.Servers = o.sync, o.servers
	cfg.Optimizer, cfg.Decay = o.optimizer, o.decay
	cfg.Model = o.model
	algo, err := collectives.ParseAlgo(o.algo)
	if err != nil {
		return cfg, collectives.Config{}, usagef("--algo: %v", err)
	}
	ccfg := collectives.Config{Algorithms: map[collectives.Op]collectives.Algo{collectives.OpAllReduce: algo}}
	if o.synthetic < 100 {
		return cfg, ccfg, usagef("--synthetic-size %d: want at least 100", o.synthetic)
	}
	check := cfg
	check.Servers = min(check.Servers, 1) // the rank count is not known yet
	if err := check.Validate(1, 1<<31); err != nil {
		return cfg, ccfg, usageError{Err: err}
	}
	return cfg, ccfg, nil
}

func runTrain(ctx context.Context, o *trainOptions, ranksSet bool) error {
	cfg, ccfg, err := o.config()
	if err != nil {
		return err
	}
	faults, err := driver.FaultsOf(o.inject)
	if err != nil {
		return err
	}
	job, isRank, err := thisRank(o.ranks, ranksSet)
	if err != nil {
		return err
	}
	if !isRank {
		if err := inject.Check(faults, o.ranks); err != nil {
			return usageError{Err: err}
		}
		return rankrun.Start(ctx, o.ranks, o.argv, nil, o.stdout, o.errw, o.tty)
	}
	// Load the data before joining, so a bad --data stops every rank at once.
	var train, test *trainer.Dataset
	if o.data != "" {
		if train, test, err = trainer.LoadIDX(o.data); err != nil {
			return err
		}
	} else {
		train, test = trainer.Synthetic(o.synthetic, o.seed), trainer.Synthetic(o.synthetic/6, o.seed+1000)
	}
	if err := cfg.Validate(job.Size, train.Len()); err != nil {
		return err
	}
	data := o.data
	if data == "" {
		data = fmt.Sprintf("synthetic-%d", o.synthetic)
	}
	config := map[string]string{trace.ConfigProgram: "train", "model": o.model, "hidden": o.hidden, trace.ConfigBatchSize: strconv.Itoa(o.batch),
		trace.ConfigGlobalBatch: strconv.Itoa(o.batch * job.Size), "epochs": strconv.Itoa(o.epochs), trace.ConfigLR: fmt.Sprint(o.lr),
		"momentum": fmt.Sprint(o.momentum), trace.ConfigLRScaling: o.scaling, trace.ConfigWarmupEpochs: fmt.Sprint(o.warmup),
		"data": data, "seed": fmt.Sprint(o.seed), "bucket_mb": fmt.Sprint(o.bucketMB), "overlap": strconv.FormatBool(o.overlap),
		"algo": o.algo, trace.ConfigRanks: strconv.Itoa(job.Size), "sync": o.sync,
		"optimizer": o.optimizer, "decay": o.decay}
	if o.lrBase > 0 {
		config["lr_base_batch"] = strconv.Itoa(o.lrBase)
	}
	if o.sync == "ps" {
		config["servers"] = strconv.Itoa(o.servers)
	}
	return driver.Train(ctx, driver.TrainOptions{Job: job, Collectives: ccfg, Trainer: cfg, Config: config, Faults: faults,
		Train: train, Test: test, Data: data, Quiet: o.quiet, TTY: o.tty, Stdout: o.stdout, Stderr: o.errw, Version: versionString()})
}
