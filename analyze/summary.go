package analyze

import "github.com/commprof/commprof/trace"

// SchemaVersion is the version of the Summary JSON (docs/stats-json.md).
// It changes only when a field changes meaning or disappears.
const SchemaVersion = 2

// Summary is everything the analyzer computed for one run. Times are in
// ns, sizes in bytes, bandwidths in GB/s (1 GB = 1e9 bytes).
type Summary struct {
	SchemaVersion int         `json:"schema_version"`
	Run           RunInfo     `json:"run"`
	Headline      Headline    `json:"headline"`
	Findings      []string    `json:"findings"`
	Collectives   []CollStats `json:"collectives"`
	Ops           []OpStats   `json:"ops"`
	Ranks         []RankStats `json:"ranks"`
	Matrix        Matrix      `json:"matrix"`
	OpMatrices    []Matrix    `json:"op_matrices"`
	MessageSizes  []SizeStats `json:"message_sizes"`
	Skew          Skew        `json:"skew"`
	Stragglers    Stragglers  `json:"stragglers"`
	PointToPoint  P2PStats    `json:"point_to_point"`
	Steps         []StepStats `json:"steps"`
	StepSummary   StepSummary `json:"step_summary"`
	Compute       []NameTime  `json:"compute"`
	Patterns      []Pattern   `json:"patterns"`
	Fit           Fit         `json:"fit"`
	Projection    *Projection `json:"projection,omitempty"`
	Marks         []Mark      `json:"marks"`
	Epochs        []Epoch     `json:"epochs"`
	// Resources is what the ranks' samples say: memory over time, CPU
	// time, energy.
	Resources Resources `json:"resources"`
	Problems  []string  `json:"problems"`
	// Diagnosis is the doctor's (Diagnose) on a run that hung or failed,
	// which the report and stats lead with; nil for a run that ended well.
	Diagnosis *Diagnosis `json:"diagnosis,omitempty"`
	// Unknown names the figures the run's source cannot give ("compute",
	// "exposed", "overlapped" for a tool's phases; "span", "durations",
	// "comm", "communication", "wait", "skew", "straggler", "bandwidth"
	// for a source without times; "communication", the headline's
	// fraction, when ranks hold different calls; "compute" and
	// "recv_wait", a receive's wait before its first byte, for a PMPI
	// run): they read 0, and pages
	// show them as unknown rather than as zero.
	Unknown []string `json:"unknown,omitempty"`

	fitAcc    *fitSums   // the fit's inputs, for fits pooled over runs
	stepCalls []callSize // world allreduces per step, for projections
}

// RunInfo describes the run the summary is of.
type RunInfo struct {
	Dir       string            `json:"dir"`
	Name      string            `json:"name"`
	ID        string            `json:"id"`
	Status    string            `json:"status"`
	Error     string            `json:"error,omitempty"` // why a failed or interrupted run ended
	WorldSize int               `json:"world_size"`
	Ranks     int               `json:"ranks_with_events"`
	Hosts     []string          `json:"hosts"`
	Command   []string          `json:"command"`
	Config    map[string]string `json:"config"`
	Metrics   trace.Metrics     `json:"metrics"`         // NaN and infinities are null in JSON
	Start     string            `json:"start,omitempty"` // RFC 3339 wall time
	// SpanNS is the time from the first event's start to the last event's end.
	SpanNS int64 `json:"span_ns"`
	// FirstNS is the first event's start on the aligned clock.
	FirstNS   int64 `json:"first_ns"`
	Events    int64 `json:"events"`
	DiskBytes int64 `json:"disk_bytes"`
	// BatchSize is the batch per rank the configuration names
	// (trace.ConfigBatchSize), else 0.
	BatchSize int `json:"batch_size"`
	// SamplesPerStep is the global batch (batch_size x world size) when
	// the configuration names one, else 0.
	SamplesPerStep int    `json:"samples_per_step"`
	ClockMethod    string `json:"clock_method,omitempty"`
	ClockUncertNS  int64  `json:"clock_uncertainty_ns"`
	// Contention is how many hosts the ranks ran on and the fewest cores
	// one of them had (0 if the run does not say).
	Contention Contention `json:"contention"`
	// Source says where a run's events came from when commprof's own
	// collective layer did not record them (PMPI, an import); Injected
	// lists the faults injected into the run on purpose.
	Source   *trace.Source `json:"source,omitempty"`
	Injected []string      `json:"injected"`
}

// Headline holds the few numbers a report leads with.
type Headline struct {
	Steps         int     `json:"steps"`
	StepNS        float64 `json:"step_ns"`          // mean step time
	StepP95NS     float64 `json:"step_p95_ns"`      // 95th percentile step time
	SamplesPerSec float64 `json:"samples_per_sec"`  // global samples / mean step time
	CommFraction  float64 `json:"comm_fraction"`    // communication time / (span or step time), mean over ranks
	ExposedFrac   float64 `json:"exposed_fraction"` // exposed communication / communication
	ExposedNS     float64 `json:"exposed_ns"`       // exposed communication per step (or per run without steps), mean over ranks
	WaitFraction  float64 `json:"wait_fraction"`    // arrival wait / communication
	BusBWGBps     float64 `json:"busbw_gbps"`       // bytes-weighted busbw of the largest-volume op, call to completion
	BusBWOp       string  `json:"busbw_op"`
	// TransferBusBWGBps is that op's busbw from the last arrival to
	// completion: what the transfer achieved once every rank was there.
	TransferBusBWGBps float64 `json:"transfer_busbw_gbps"`
	LinkGBps          float64 `json:"link_gbps"`     // 1/beta from the fit
	BusBWOfLink       float64 `json:"busbw_of_link"` // BusBWGBps / LinkGBps
	// Straggler is the costliest rank the what-if replay names
	// (Stragglers.Named), -1 exactly when it names none.
	Straggler       int          `json:"straggler"`
	StragglerCostNS float64      `json:"straggler_cost_ns"`  // what it cost per window (step), ns
	StragglerShare  float64      `json:"straggler_share"`    // what it cost, as a share of the run
	StragglerFrac   float64      `json:"straggler_fraction"` // share of multi-rank collectives it arrived last in
	StragglerLateNS float64      `json:"straggler_late_ns"`  // its mean lateness behind the others' mean arrival
	Accuracy        trace.Number `json:"accuracy"`           // final test accuracy from the manifest, 0 if none
	// Verdicts a report colours its figures by: communication is more
	// than CommHighFraction of the step (of the run without steps), and
	// more than ExposedHighFraction of it is exposed.
	CommHigh    bool `json:"comm_high"`
	ExposedHigh bool `json:"exposed_high"`
	// A benchmark's key numbers, over the collective groups but barriers:
	// the group of the highest busbw (nil when none has a busbw), the
	// largest size per call's group (the highest busbw among several), and
	// the smallest and largest size per call (0 without collectives).
	PeakBusBW    *SizeBusBW `json:"peak_busbw,omitempty"`
	LargestBusBW *SizeBusBW `json:"largest_busbw,omitempty"`
	CallBytesMin int64      `json:"call_bytes_min"`
	CallBytesMax int64      `json:"call_bytes_max"`
}

// SizeBusBW is one collective group's bandwidth at its size per call.
type SizeBusBW struct {
	Op        string  `json:"op"`
	Algo      string  `json:"algo"`
	CallBytes int64   `json:"call_bytes"` // bytes per call
	BusBWGBps float64 `json:"busbw_gbps"`
	AlgBWGBps float64 `json:"algbw_gbps"`
}

// Dist is a distribution of durations in ns.
type Dist struct {
	N    int64   `json:"n"`
	Sum  int64   `json:"sum_ns"`
	Mean float64 `json:"mean_ns"`
	P50  int64   `json:"p50_ns"`
	P95  int64   `json:"p95_ns"`
	P99  int64   `json:"p99_ns"`
	Max  int64   `json:"max_ns"`
}

// CollStats is one collective op, algorithm and log2 size bucket. Each
// rank's event of a call is one sample of the time distribution; Calls
// counts calls (matched across ranks by communicator and sequence).
type CollStats struct {
	Op        string  `json:"op"`
	Algo      string  `json:"algo"`
	Bucket    int     `json:"bucket"`
	BucketLbl string  `json:"bucket_label"`
	Ranks     int     `json:"ranks"` // communicator size (most common)
	Calls     int64   `json:"calls"`
	Bytes     int64   `json:"bytes"` // sum over calls of the call's bytes
	Time      Dist    `json:"time"`
	AlgBWGBps float64 `json:"algbw_gbps"` // mean bytes / mean time
	BusBWGBps float64 `json:"busbw_gbps"` // algbw x the op's nccl-tests factor: what the program got, call to completion
	WaitNS    int64   `json:"wait_ns"`    // sum of the ranks' arrival waits
	// TransferNS is the mean time from the last rank's arrival to each
	// rank's completion: what the transfer took once everyone was there.
	TransferNS        float64 `json:"transfer_ns"`
	TransferBusBWGBps float64 `json:"transfer_busbw_gbps"` // busbw over TransferNS
	// WaitFraction is WaitNS over the time of the group's events (Time.Sum).
	WaitFraction float64 `json:"wait_fraction"`
	// CallNS is the time per call algbw is over: the mean time, or for a
	// benchmark's timed loop the slowest rank's loop time per call.
	CallNS float64 `json:"call_ns"`
	// TimeSpread is how much the group's mean time varies within the
	// run: over NoiseBlocks contiguous blocks of its calls, in call order
	// (what a diff's verdicts are measured against); unmeasured with
	// fewer than 3 calls.
	TimeSpread Spread `json:"time_spread"`
}

// OpStats is one collective op over every algorithm and size.
type OpStats struct {
	Op        string  `json:"op"`
	Calls     int64   `json:"calls"`
	Bytes     int64   `json:"bytes"`
	TimeNS    int64   `json:"time_ns"` // sum over ranks' events
	MeanNS    float64 `json:"mean_ns"`
	BusBWGBps float64 `json:"busbw_gbps"` // bytes-weighted over its buckets
	// TransferBusBWGBps is the same over the transfers (from the last
	// rank's arrival to completion).
	TransferBusBWGBps float64 `json:"transfer_busbw_gbps"`
	WaitNS            int64   `json:"wait_ns"`
	Pattern           string  `json:"pattern"`
	Share             float64 `json:"share"` // of all collective time
}

// RankStats is one rank's totals.
type RankStats struct {
	Rank         int     `json:"rank"`
	Host         string  `json:"host"`
	Events       int64   `json:"events"`
	ComputeNS    int64   `json:"compute_ns"`    // union of compute spans
	CommNS       int64   `json:"comm_ns"`       // union of collective spans
	OverlappedNS int64   `json:"overlapped_ns"` // comm inside compute
	ExposedNS    int64   `json:"exposed_ns"`    // comm outside compute
	WaitNS       int64   `json:"wait_ns"`       // arrival wait in collectives
	RecvWaitNS   int64   `json:"recv_wait_ns"`  // recv time before the first byte
	SendNS       int64   `json:"send_ns"`
	RecvNS       int64   `json:"recv_ns"`
	BytesSent    int64   `json:"bytes_sent"`
	BytesRecv    int64   `json:"bytes_recv"`
	MsgsSent     int64   `json:"msgs_sent"`
	MsgsRecv     int64   `json:"msgs_recv"`
	LocalBytes   int64   `json:"local_bytes"` // messages to itself (local copies), not in the figures above
	LocalMsgs    int64   `json:"local_msgs"`
	LastArrivals int64   `json:"last_arrivals"` // collectives it arrived last in
	MeanLateNS   float64 `json:"mean_late_ns"`  // mean of its arrival minus the others' mean arrival
	Truncated    bool    `json:"truncated"`
	// What the rank's samples say (docs/metrics.md); all 0 when it
	// recorded none (Samples 0).
	Samples      int     `json:"samples"`        // memory readings
	PeakRSSBytes int64   `json:"peak_rss_bytes"` // the most resident memory: the kernel's high-water mark or the largest reading
	MeanRSSBytes int64   `json:"mean_rss_bytes"` // resident memory averaged over the sampled time
	BaseRSSBytes int64   `json:"base_rss_bytes"` // the first reading: resident memory when recording began
	CPUUserNS    int64   `json:"cpu_user_ns"`    // user CPU time between the first and last reading
	CPUSystemNS  int64   `json:"cpu_system_ns"`  // system CPU time between them
	SampledNS    int64   `json:"sampled_ns"`     // from the first reading to the last
	CPUUtil      float64 `json:"cpu_util"`       // (user + system) / SampledNS: cores kept busy (1 = one core all the time)
	// ComputeCPU is the CPU time (user + system) per ns of compute spans
	// (ComputeNS): about 1 or more for a rank that computed on its own
	// core, well below 1 for one descheduled while it computed; 0 without
	// compute spans.
	ComputeCPU float64 `json:"compute_cpu"`
	// SchedWaitNS is the time the rank's threads (an MPI rank: its main
	// thread) were runnable but waited for a core, between the first and
	// last reading; SchedWaitFraction is it over SampledNS.
	SchedWaitNS       int64   `json:"sched_wait_ns"`
	SchedWaitFraction float64 `json:"sched_wait_fraction"`
	// ActivationBytes is the largest activation_bytes the program said
	// it held (commprof's trainer: its model's buffers), 0 if none.
	ActivationBytes int64 `json:"activation_bytes"`
}

// Matrix is rank x rank traffic: Cells[src][dst], from received messages.
type Matrix struct {
	Op      string `json:"op"` // "" for every op
	Pattern string `json:"pattern,omitempty"`
	// Ranks is n: senders and receivers are ranks 0 to n-1.
	Ranks int `json:"ranks"`
	// Cells are the pairs of ranks with traffic, by sender, then
	// receiver: a wide run's ranks each talk to a few of thousands.
	Cells []MatrixCell `json:"cells"`
}

// MatrixCell is what one rank sent another.
type MatrixCell struct {
	Src      int   `json:"src"`
	Dst      int   `json:"dst"`
	Bytes    int64 `json:"bytes"`
	Messages int64 `json:"messages"`
	TimeNS   int64 `json:"time_ns"` // the receives' time, post to completion (waiting for the sender included)
	// SendNS is the senders' time in their sends: what it took to push
	// the bytes into the link, so Bytes/SendNS is the edge's bandwidth.
	SendNS int64 `json:"send_ns"`
}

// DenseMatrix is a Matrix as n × n tables indexed [sender][receiver], for
// the few ranks a rank-by-rank chart shows.
type DenseMatrix struct {
	Bytes, Messages, TimeNS, SendNS [][]int64
}

// Dense lays m out as n × n tables: n² numbers each, for small n.
func (m Matrix) Dense() DenseMatrix {
	n := m.Ranks
	d := DenseMatrix{Bytes: make([][]int64, n), Messages: make([][]int64, n), TimeNS: make([][]int64, n), SendNS: make([][]int64, n)}
	for i := range n {
		d.Bytes[i], d.Messages[i], d.TimeNS[i], d.SendNS[i] = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	}
	for _, c := range m.Cells {
		d.Bytes[c.Src][c.Dst] = c.Bytes
		d.Messages[c.Src][c.Dst] = c.Messages
		d.TimeNS[c.Src][c.Dst] = c.TimeNS
		d.SendNS[c.Src][c.Dst] = c.SendNS
	}
	return d
}

// SizeStats is one op's messages in one log2 size bucket.
type SizeStats struct {
	Op        string  `json:"op"`
	Bucket    int     `json:"bucket"`
	BucketLbl string  `json:"bucket_label"`
	Messages  int64   `json:"messages"`
	Bytes     int64   `json:"bytes"`
	TimeNS    int64   `json:"time_ns"` // recv durations
	WaitNS    int64   `json:"wait_ns"` // of which before the first byte
	GBps      float64 `json:"gbps"`    // bytes / (time - wait)
}

// Skew is arrival skew over the run's collectives.
type Skew struct {
	Calls   int64      `json:"calls"` // multi-rank calls matched across ranks
	Dist    Dist       `json:"dist"`  // of skew = last start - first start
	ByOp    []OpSkew   `json:"by_op"`
	Ranking []int      `json:"last_arrival_ranking"` // ranks, most often last first (not the stragglers: Stragglers ranks by cost)
	Series  SkewSeries `json:"series"`
	// ByLabel is the skew of each label's calls (a tensor of an imported
	// Horovod timeline, a PyTorch process group), the labels whose calls
	// kept ranks waiting longest first; at most 200.
	ByLabel []LabelSkew `json:"by_label"`
	// LabelSeries is every labelled call over time (sampled to at most
	// 2000): when it began, its skew and the rank that came last.
	LabelSeries LabelSeries `json:"label_series"`
}

// LabelSkew is arrival skew over one label's calls.
type LabelSkew struct {
	Label  string `json:"label"`
	Op     string `json:"op"`
	Calls  int64  `json:"calls"` // calls several ranks recorded
	Bytes  int64  `json:"bytes"` // of its largest call
	Dist   Dist   `json:"dist"`  // of skew
	WaitNS int64  `json:"wait_ns"`
	// Last lists the ranks that came last to its calls, most costly
	// first: how often, and how long they kept the next latest rank
	// waiting (their arrival minus the next latest's), summed.
	Last []LastRank `json:"last"`
}

// LastRank is one rank's last arrivals among a set of calls.
type LastRank struct {
	Rank   int   `json:"rank"`
	Calls  int64 `json:"calls"`
	LateNS int64 `json:"late_ns"`
}

// LabelSeries samples labelled calls in time order.
type LabelSeries struct {
	AtNS   []int64  `json:"at_ns"` // first arrival
	Label  []string `json:"label"`
	SkewNS []int64  `json:"skew_ns"`
	Last   []int    `json:"last_rank"`
}

// OpSkew is arrival skew of one op.
type OpSkew struct {
	Op   string `json:"op"`
	Dist Dist   `json:"dist"`
}

// SkewSeries samples calls on the world communicator for a heatmap:
// Offset[i][r] is rank r's arrival in call Seq[i] minus the first
// arrival, -1 if the rank has no event for it.
type SkewSeries struct {
	Seq    []int64   `json:"seq"`
	Op     []string  `json:"op"`
	Label  []string  `json:"label"` // the call's label (a tensor), "" for none
	Offset [][]int64 `json:"offset_ns"`
}

// StepStats is one training step, averaged over the ranks that ran it.
type StepStats struct {
	Step         int     `json:"step"`
	Ranks        int     `json:"ranks"`
	StartNS      int64   `json:"start_ns"`
	TimeNS       float64 `json:"time_ns"`
	MaxNS        int64   `json:"max_ns"` // slowest rank
	ComputeNS    float64 `json:"compute_ns"`
	ExposedNS    float64 `json:"exposed_ns"`
	OverlappedNS float64 `json:"overlapped_ns"`
	IdleNS       float64 `json:"idle_ns"`
	WaitNS       float64 `json:"wait_ns"`
	CommBytes    float64 `json:"comm_bytes"` // collective bytes per rank
	// EnergyJ is the hosts' energy (RAPL package and DRAM) from the
	// step's first start to its slowest rank's end, interpolated between
	// readings; 0 where no host measured energy.
	EnergyJ float64 `json:"energy_j"`
	// CoreWaitNS is the time the ranks' threads waited for a core (ready
	// to run, not running) in the step's window, from the step's first
	// start to its slowest rank's end, interpolated between the ranks'
	// sched_wait_ns readings and averaged over the ranks that read it; 0
	// where none did (Resources.CoreWaitRanks).
	CoreWaitNS float64 `json:"core_wait_ns"`
}

// StepSummary averages the steps.
type StepSummary struct {
	Steps         int     `json:"steps"`
	Time          Dist    `json:"time"`
	ComputeNS     float64 `json:"compute_ns"`
	ExposedNS     float64 `json:"exposed_ns"`
	OverlappedNS  float64 `json:"overlapped_ns"`
	IdleNS        float64 `json:"idle_ns"`
	WaitNS        float64 `json:"wait_ns"`
	SamplesPerSec float64 `json:"samples_per_sec"`
	// CoreWaitNS is the mean over steps of StepStats.CoreWaitNS.
	CoreWaitNS float64 `json:"core_wait_ns"`
}

// NameTime is total time in one compute span name.
type NameTime struct {
	Name   string `json:"name"`
	Count  int64  `json:"count"`
	TimeNS int64  `json:"time_ns"`
}

// Pattern is the shape of one op and algorithm's messages.
type Pattern struct {
	Op      string   `json:"op"`
	Algo    string   `json:"algo"`
	Comm    string   `json:"comm"`
	Ranks   int      `json:"ranks"`
	Pattern string   `json:"pattern"` // ring, chain, tree, butterfly, star, all-to-all, direct, other
	Sampled int      `json:"sampled"` // calls classified
	Agree   int      `json:"agree"`   // of which had this pattern
	Edges   [][2]int `json:"edges"`   // src, dst world ranks of one sampled call
}

// Mark is an instant the program recorded, such as an epoch's accuracy.
type Mark struct {
	Rank  int          `json:"rank"`
	Name  string       `json:"name"`
	AtNS  int64        `json:"at_ns"`
	Step  int          `json:"step"`
	Value trace.Number `json:"value"` // NaN and infinities are null in JSON
}

// IsUnknown reports whether the run's source cannot give figure.
func (s *Summary) IsUnknown(figure string) bool {
	for _, u := range s.Unknown {
		if u == figure {
			return true
		}
	}
	return false
}

// forgetProgramWork drops the figures that need the program's own work
// when the run's compute spans are a tool's phases: the overlap of
// communication with them, or its exposure, says nothing about the
// program.
func (s *Summary) forgetProgramWork() {
	s.unknown("compute", "exposed", "overlapped")
	for i := range s.Ranks {
		s.Ranks[i].ComputeNS, s.Ranks[i].ExposedNS, s.Ranks[i].OverlappedNS = 0, 0, 0
	}
	for i := range s.Steps {
		s.Steps[i].ComputeNS, s.Steps[i].ExposedNS, s.Steps[i].OverlappedNS = 0, 0, 0
	}
	s.StepSummary.ComputeNS, s.StepSummary.ExposedNS, s.StepSummary.OverlappedNS = 0, 0, 0
}

// unknown adds figures to Unknown, once each.
func (s *Summary) unknown(figures ...string) {
	for _, f := range figures {
		if !s.IsUnknown(f) {
			s.Unknown = append(s.Unknown, f)
		}
	}
}

// forgetTimes drops the figures measured from times the run's source does
// not have (trace.Source.Untimed, NoDurations): without durations, the
// time in communication, the waits, the straggler replay, bandwidths and
// the model would be read off zeros; without any time, also the run's
// span and the arrival skew, since the events are placed in order only.
// Counts, sizes, communicators and algorithms stay.
func (s *Summary) forgetTimes(starts bool) {
	s.unknown("durations", "comm", "communication", "exposed", "overlapped", "wait", "straggler", "bandwidth")
	for i := range s.Ranks {
		r := &s.Ranks[i]
		r.CommNS, r.ExposedNS, r.OverlappedNS, r.WaitNS, r.RecvWaitNS, r.SendNS, r.RecvNS = 0, 0, 0, 0, 0, 0, 0
	}
	for i := range s.Collectives {
		c := &s.Collectives[i]
		c.Time, c.TimeSpread = Dist{N: c.Time.N}, Spread{}
		c.AlgBWGBps, c.BusBWGBps, c.WaitNS, c.TransferNS, c.TransferBusBWGBps = 0, 0, 0, 0, 0
	}
	for i := range s.Ops {
		o := &s.Ops[i]
		o.TimeNS, o.MeanNS, o.BusBWGBps, o.TransferBusBWGBps, o.WaitNS, o.Share = 0, 0, 0, 0, 0, 0
	}
	for _, m := range append([]Matrix{s.Matrix}, s.OpMatrices...) {
		for i := range m.Cells {
			m.Cells[i].TimeNS, m.Cells[i].SendNS = 0, 0
		}
	}
	for i := range s.MessageSizes {
		s.MessageSizes[i].TimeNS, s.MessageSizes[i].WaitNS, s.MessageSizes[i].GBps = 0, 0, 0
	}
	s.PointToPoint.TimeNS, s.PointToPoint.Share = 0, 0
	for i := range s.PointToPoint.Hubs {
		h := &s.PointToPoint.Hubs[i]
		h.TransferNS, h.WaitNS, h.GBps = 0, 0, 0
	}
	for i := range s.Skew.ByLabel {
		s.Skew.ByLabel[i].WaitNS = 0
	}
	s.Stragglers = Stragglers{Reason: "the run's source does not record how long calls took", Ranks: []RankCost{}, Named: []int{}}
	s.Fit = Fit{RankCounts: []int{}, Source: "run", Reason: "the run's source does not record how long calls took; " + howToFit}
	s.fitAcc, s.stepCalls, s.Projection = &fitSums{}, nil, nil
	if starts {
		return
	}
	s.unknown("span", "skew")
	s.Run.SpanNS = 0
	for i := range s.Ranks {
		s.Ranks[i].LastArrivals, s.Ranks[i].MeanLateNS = 0, 0
	}
	s.Skew = Skew{Calls: s.Skew.Calls, Ranking: []int{}, ByOp: []OpSkew{}, ByLabel: []LabelSkew{},
		Series:      SkewSeries{Seq: []int64{}, Op: []string{}, Label: []string{}, Offset: [][]int64{}},
		LabelSeries: LabelSeries{AtNS: []int64{}, Label: []string{}, SkewNS: []int64{}, Last: []int{}}}
}
