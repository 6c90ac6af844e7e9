package report

import (
	"strings"
	"unicode"

	"github.com/commprof/commprof/analyze"
)

// MetricsURL is where the definitions of every figure live, in full.
const MetricsURL = "https://github.com/commprof/commprof/blob/main/docs/metrics.md"

// definition is what a figure on a page means, in a sentence, and the
// section of docs/metrics.md that gives its formula.
type definition struct {
	Slug, Term, Text, Section string
}

// URL is the definition's section of docs/metrics.md.
func (d definition) URL() string { return MetricsURL + "#" + headingAnchor(d.Section) }

// Sections of docs/metrics.md, as their headings read.
const (
	secEvents   = "Events the figures come from"
	secColl     = "Collectives (`stats --by op`, `collectives[]`, `ops[]`)"
	secSkew     = "Arrival skew, wait and stragglers (`skew`, `ranks[]`)"
	secRank     = "Per rank (`stats --by rank`, `ranks[]`)"
	secStep     = "Per step (`stats --by step`, `steps[]`, `step_summary`)"
	secHeadline = "Headline (`headline`) and findings"
	secMatrix   = "Communication matrix (`stats --by peer`, `matrix`, `op_matrices[]`)"
	secSizes    = "Message sizes (`stats --by size`, `message_sizes[]`)"
	secModel    = "Alpha-beta-gamma model (`fit`) and projection (`projection`, `predict`)"
	secDiff     = "Diff (`diff`)"
	secEpochs   = "Epochs (`epochs[]`)"
	secSweep    = "Sweep (`sweep`, `sweep.json`)"
	secMemory   = "Memory, CPU and energy (`stats --by memory`, `ranks[]`, `resources`)"
)

// definitions are the figures the pages link to their meaning.
var definitions = map[string]definition{}

func init() {
	for _, d := range []definition{
		{"step-time", "step time", "The mean time of a training step over the steps and ranks; p95 over the steps' mean times.", secStep},
		{"throughput", "throughput", "Samples per step (batch size × ranks) over the mean step time.", secStep},
		{"communication", "communication", "With steps: exposed plus overlapped communication per step over the step time; without: the ranks' communication over the run.", secHeadline},
		{"exposed", "exposed communication", "Communication the program had to wait for: the time it spent in collectives, point-to-point calls or waits on them, while they were moving data.", secRank},
		{"overlapped", "overlapped communication", "Communication that went on while the program did something else: communication minus exposed.", secRank},
		{"compute", "compute", "The length of the union of the rank's own work spans (forward, backward, optimizer, data).", secRank},
		{"idle", "idle", "Step time neither computing nor blocked on communication.", secStep},
		{"busbw", "bus bandwidth (busbw)", "algbw × the nccl-tests factor of the op on n ranks (allreduce 2(n−1)/n): what the program got, call to completion, in GB/s of 10⁹ bytes.", secColl},
		{"algbw", "algbw", "The call's bytes over its mean time (for a benchmark's timed loop, over the slowest rank's loop time per call).", secColl},
		{"transfer-bw", "transfer busbw", "busbw over the time from a call's last arrival to each rank's completion: what the transfer achieved once every rank was there.", secColl},
		{"wait", "arrival wait", "Time a rank spent in a collective before the last rank arrived; as a fraction, of the communication time.", secSkew},
		{"skew", "arrival skew", "How much later than the first rank each rank arrived at a collective.", secSkew},
		{"last", "last arrivals", "How many calls the rank arrived at last (strictly later than the earliest).", secSkew},
		{"late", "lateness", "The rank's start minus the mean start of the other ranks of a call, averaged over its calls (negative: early).", secSkew},
		{"straggler", "straggler", "A rank the others lose time waiting for, found by replaying the run with each rank's own work held to the typical: named when what that saves stands above the noise measured in the same run (at 99% confidence) and is at least 5% of the run.", secSkew},
		{"critical-path", "critical path", "The chain of work and waits, across ranks, that set the slowest step's length in the replay of the run.", secSkew},
		{"accuracy", "test accuracy", "The test-set accuracy at the end of the last epoch, as the trainer recorded it.", secEpochs},
		{"calls", "calls", "Collective calls matched across ranks by communicator and sequence number.", secEvents},
		{"call-size", "size per call", "The bytes of one call: its buffer (for allgather and reduce-scatter, the whole n-rank buffer); a benchmark's sizes run from its smallest to its largest.", secColl},
		{"latency", "mean, p50, p95, p99, max", "Over every rank's event of the group: one sample per rank per call; percentiles are nearest-rank.", secColl},
		{"link", "link bandwidth", "1/β of the alpha-beta-gamma model fitted to the run's messages (within a host) or calibrated.", secModel},
		{"model", "model", "T = α per message step + β per byte moved + γ per byte reduced, fitted to the run's messages and calls.", secModel},
		{"matrix", "traffic matrix", "Bytes, messages, time and bandwidth of the messages each rank received from each other, per op.", secMatrix},
		{"sizes", "message sizes", "The messages grouped by op and log2 size bucket.", secSizes},
		{"outcome", "outcomes", "What a configuration was changed for: throughput, time per epoch, accuracy, time to accuracy, time, bytes and exposed communication per sample.", secDiff},
		{"effect", "effect per sample", "How much a change moves the time per sample (per step without batch sizes), signed: positive when B takes longer.", secDiff},
		{"time-to-target", "time to target", "The time of the first epoch end whose test accuracy reached the target, since the run's first event.", secSweep},
		{"bytes-per-sample", "bytes per sample", "The collective bytes a rank's calls carried in a step, over the samples of the step's global batch.", secSweep},
		{"scaling", "scaling efficiency", "samples/s over (samples/s at the sweep's smallest rank count × the rank ratio): 1 is perfect.", secSweep},
		{"epoch-time", "time per epoch", "The mean time between the ends of consecutive epochs.", secEpochs},
		{"epoch-accuracy", "accuracy per epoch", "The test accuracy at each epoch's end, in percent, the mean over a configuration's repeats.", secSweep},
		{"time-per-sample", "time per sample", "The mean step time over the samples of a step (batch size × ranks).", secDiff},
		{"span", "run span", "The time from the run's first event to the end of its last.", secEvents},
		{"events", "events", "The events the rank recorded: collectives, messages, waits, compute spans, steps and marks.", secEvents},
		{"coll-ranks", "ranks", "The communicator size most of the group's calls had: the ranks with an event for the call.", secColl},
		{"coll-bytes", "bytes", "The calls' bytes summed: each call's buffer size (for allgather and reduce-scatter the whole n-rank buffer).", secColl},
		{"call-time", "time per call", "The time per call algbw is over: the mean time, or for a benchmark's timed loop the slowest rank's loop time per call.", secColl},
		{"comm", "communication", "The length of the union of the rank's collective events and its point-to-point sends and receives.", secRank},
		{"sent-recv", "sent and received", "The bytes and the number of the rank's send and receive events.", secRank},
		{"step-ranks", "ranks of a step", "The ranks that ran the step: its figures are the mean over them.", secStep},
		{"slowest-rank", "slowest rank", "The step's time on its slowest rank.", secStep},
		{"comm-bytes", "communication bytes", "The bytes of the collectives that started in the step, mean over its ranks.", secStep},
		{"sweep-config", "configuration", "A sweep's configuration: rank count, learning-rate rule, warm-up epochs, batch size per rank and the global batch (batch size × ranks).", secSweep},
		{"diff-change", "change", "B against A: (B − A) / |A|, new when A has no figure, gone when B has none.", secDiff},
		{"diff-noise", "95% interval", "Where the change could lie given how much the figure varies inside each run: over ten stretches of its steps (or of a collective group's calls), at 95%. A change is better or worse only when the interval leaves out 0 and the change is over 2%; a figure with no samples inside a run (\"floor\") needs 10%. Otherwise it is within noise.", secDiff},
		{"op-time", "op time", "An op's time per step and rank: the time of its events over the ranks and the steps (per epoch for ops called less than once every other step).", secDiff},
		{"rss", "resident memory (RSS)", "The rank's pages in RAM (anonymous, file-backed and shared), sampled every period: base is the first reading, peak the largest reading or the kernel's high-water mark, mean the time-weighted mean. Swapped-out pages and GPU memory are not in it.", secMemory},
		{"activations", "activation bytes", "The bytes the program says its model's activation buffers hold (commprof's trainer reports them).", secMemory},
		{"cpu", "CPU time and use", "The rank's user and system CPU time between its first and last sample; use is their sum over that time, in cores.", secMemory},
		{"compute-cpu", "CPU per compute", "The rank's CPU time over its compute spans' time: near 1 (or more with threads) when it computed on a core of its own, well below the other ranks' when it was descheduled.", secMemory},
		{"core-wait", "core wait per step", "The time the ranks' threads waited for a core (ready to run, not running) in a step, mean over ranks: a diff counts a change in time no larger than the runs' difference in it as within noise (load).", secDiff},
		{"sched-wait", "waiting for a core", "The share of the sampled time the rank's threads (an MPI rank: its main thread) were ready to run but waited for a core (the kernel's schedstat run delay), summed over its threads, so more than 100% when several wait at once: how long the host kept it descheduled.", secMemory},
		{"energy", "energy", "RAPL package and DRAM energy of each host and its GPUs' (NVML, read by MPI ranks), read by one rank per host, from the first reading to the last, summed over hosts; per step, interpolated between readings.", secMemory},
		{"result", "results", "The trainer's final metrics as it recorded them in the run's manifest: loss, train and test accuracy, images per second.", secDiff},
	} {
		definitions[d.Slug] = d
	}
}

// headingAnchor is the anchor GitHub gives a Markdown heading: lower
// case, spaces to hyphens, punctuation other than hyphens and
// underscores dropped.
func headingAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// columnDefs links the columns of the stats views to their definitions.
var columnDefs = map[string]map[string]string{
	"op": {"ranks": "coll-ranks", "calls": "calls", "bytes": "coll-bytes", "total": "latency", "mean": "latency", "p50": "latency",
		"p95": "latency", "p99": "latency", "max": "latency", "algbw": "algbw", "busbw": "busbw", "wait": "wait"},
	"rank": {"events": "events", "compute": "compute", "comm": "comm", "exposed": "exposed", "overlapped": "overlapped", "wait": "wait",
		"last": "last", "late": "late", "sent": "sent-recv", "recv": "sent-recv", "msgs sent": "sent-recv", "msgs recv": "sent-recv"},
	"size": {"messages": "sizes", "bytes": "sizes", "time": "sizes", "wait": "sizes", "transfer bw": "transfer-bw"},
	"step": {"ranks": "step-ranks", "time": "step-time", "slowest rank": "slowest-rank", "compute": "compute", "exposed comm": "exposed",
		"overlapped comm": "overlapped", "idle": "idle", "wait": "wait", "comm bytes": "comm-bytes"},
	"peer": {"bytes": "matrix", "messages": "matrix", "recv time": "matrix", "GB/s": "matrix"},
	"memory": {"samples": "rss", "base rss": "rss", "peak rss": "rss", "mean rss": "rss", "activations": "activations",
		"cpu user": "cpu", "cpu system": "cpu", "cpu use": "cpu", "cpu per compute": "compute-cpu", "waiting for a core": "sched-wait"},
}

// changeDef is the definition of the figure a diff's change is of: the
// slug analyze gave it.
func changeDef(c analyze.Change) string { return c.Def }

// glossary collects the definitions a page links to, in order of first
// use, for its definitions section.
type glossary struct {
	used []definition
	seen map[string]bool
}

// link returns the anchor of slug's definition on the page, "" when
// there is none, and records it as used.
func (g *glossary) link(slug string) string {
	d, ok := definitions[slug]
	if !ok {
		return ""
	}
	if g.seen == nil {
		g.seen = map[string]bool{}
	}
	if !g.seen[slug] {
		g.seen[slug] = true
		g.used = append(g.used, d)
	}
	return "def-" + slug
}
