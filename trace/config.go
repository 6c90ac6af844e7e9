package trace

import (
	"sort"
	"strconv"
	"strings"
)

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

// Keys of run.json's config that name the communicators (process groups)
// a recorded run made: how many, and each one's members.
const (
	ConfigComms      = "comms"
	ConfigCommPrefix = "comm " // "comm NAME": its members' world ranks in its rank order
)

// SortComms orders communicator names as run.json lists them: world
// first, then by name.
func SortComms(names []string) {
	sort.Slice(names, func(i, j int) bool {
		if (names[i] == "world") != (names[j] == "world") {
			return names[i] == "world"
		}
		return names[i] < names[j]
	})
}

// RankList writes world ranks compactly, as a communicator's members in
// run.json: runs of three or more consecutive ranks as a-b, the others
// one by one ("0-3", "1,3,5"), a rank not known (negative) as ?.
func RankList(ranks []int32) string {
	var b strings.Builder
	for i := 0; i < len(ranks); {
		j := i
		for j+1 < len(ranks) && ranks[i] >= 0 && ranks[j+1] == ranks[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		switch {
		case ranks[i] < 0:
			b.WriteByte('?')
		case j-i >= 2:
			b.WriteString(strconv.Itoa(int(ranks[i])) + "-" + strconv.Itoa(int(ranks[j])))
		default:
			j = i
			b.WriteString(strconv.Itoa(int(ranks[i])))
		}
		i = j + 1
	}
	return b.String()
}
