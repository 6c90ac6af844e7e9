package trace

import "fmt"

// FormatVersion is the version of the trace format this package writes.
// Readers accept streams of this version only.
const FormatVersion = 1

// MaxWorldSize is the most ranks a run may say it has: readers refuse a
// larger world_size rather than size anything by it.
const MaxWorldSize = 1 << 20

// Kind says what an event is.
type Kind uint8

// Event kinds. The zero Kind is an event of a kind this reader does not
// know, written by a later version; readers skip it.
const (
	KindCollective Kind = iota + 1 // one collective call on one rank
	KindSend                       // one message sent by a collective (or point-to-point)
	KindRecv                       // one message received
	KindCompute                    // a span of the program's own work: forward, backward, ...
	KindStep                       // one training step
	KindMark                       // an instant with a value: an epoch's accuracy, ...
	KindWait                       // the program blocked on a non-blocking call's request until it completed
	KindReduce                     // a reduction kernel run inside a collective (bytes reduced)
	KindSample                     // a reading of a counter (resident memory, CPU time, energy): Name the counter, Value the reading
)

var kindNames = [...]string{
	KindCollective: "collective",
	KindSend:       "send",
	KindRecv:       "recv",
	KindCompute:    "compute",
	KindStep:       "step",
	KindMark:       "mark",
	KindWait:       "wait",
	KindReduce:     "reduce",
	KindSample:     "sample",
}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ParseKind parses a kind name as printed by Kind.String.
func ParseKind(s string) (Kind, error) {
	for i, n := range kindNames {
		if n != "" && n == s {
			return Kind(i), nil
		}
	}
	return 0, fmt.Errorf("unknown event kind %q (want collective, send, recv, compute, step, mark, wait, reduce or sample)", s)
}

// MarkTimed is the mark that delimits a program's timed region: value 1
// where it starts, 0 where it ends. A benchmark puts its timed iterations
// inside one, so that analyses can leave warm-up and checking calls out of
// timed figures.
const MarkTimed = "timed"

// AlgoUnknown is the algo of a collective whose source does not say which
// algorithm ran (an imported nccl-tests table or Inspector log). Analyses
// that need an algorithm's cost shape assume the standard one for the op
// (ring for allreduce, allgather and reduce-scatter; a tree for broadcast
// and reduce), and the run's source says so in Missing.
const AlgoUnknown = "unknown"

// Event is one row of a trace. Times are in nanoseconds; Start is since the
// run's epoch, on the rank's clock as written, and on the aligned clock
// once a run reader has applied the clock corrections.
type Event struct {
	Rank  int32
	Kind  Kind
	Name  string // allreduce, broadcast, ... for communication; forward, backward, ... for compute; a mark's name
	Start int64  // ns since the run's epoch
	Dur   int64  // ns; 0 for marks
	Bytes int64  // payload bytes; 0 where none
	Peer  int32  // the other rank of a send or recv (world rank); -1 where none
	Seq   int64  // the collective's sequence number on its communicator; sends and recvs carry their parent's; -1 where none
	Step  int32  // training step; -1 where none
	Algo  string // ring, tree, recursive_doubling, ...; "" where none
	DType string // float32, ...; "" where none
	Root  int32  // root of rooted collectives; -1 where none
	Chunk int32  // the algorithm's step index inside its collective; -1 where none
	Comm  string // communicator name: world, or a sub-communicator's
	Wait  int64  // recv: ns of Dur spent before the first byte arrived (waiting for the sender); 0 otherwise
	Value float64
	// Label is the user-level name of the operation: a Horovod tensor, a
	// PyTorch process group or record_function; "" where none.
	Label string
}

// End returns Start+Dur.
func (e *Event) End() int64 { return e.Start + e.Dur }
