package trace

import "strconv"

// Keys of run.json's config that commprof reads back. The reference
// trainer and the benchmark write them (a recorded program of the user's
// may write any keys, shown as they are); the analyses read them through
// ParseConfig, once.
const (
	ConfigProgram      = "program" // train, bench, ...
	ConfigOp           = "op"      // the benchmark's collective
	ConfigBatchSize    = "batch_size"
	ConfigGlobalBatch  = "global_batch"
	ConfigRanks        = "ranks"
	ConfigLR           = "lr"
	ConfigLRScaling    = "lr_scaling"
	ConfigWarmupEpochs = "warmup_epochs"
)

// Names of the figures a training run reports: its marks at each epoch's
// end, and its final metrics in run.json.
const (
	MetricLoss            = "loss"
	MetricTrainAccuracy   = "train_accuracy"
	MetricTestAccuracy    = "test_accuracy"
	MetricLR              = "lr"
	MetricEpoch           = "epoch" // the mark that closes an epoch: its value is the epoch's number
	MetricImagesPerSecond = "images_per_second"
)

// RunConfig is what the analyses read of a run's config.
type RunConfig struct {
	Program string
	Op      string
	// BatchSize is the batch per rank; 0 where the config has none, or
	// one that is not a positive whole number.
	BatchSize    int
	LR           string
	LRScaling    string
	WarmupEpochs string
}

// ParseConfig reads a run's config.
func ParseConfig(m map[string]string) RunConfig {
	c := RunConfig{Program: m[ConfigProgram], Op: m[ConfigOp], LR: m[ConfigLR], LRScaling: m[ConfigLRScaling], WarmupEpochs: m[ConfigWarmupEpochs]}
	if b, err := strconv.Atoi(m[ConfigBatchSize]); err == nil && b > 0 {
		c.BatchSize = b
	}
	return c
}
