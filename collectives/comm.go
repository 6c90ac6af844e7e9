package collectives

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Communicator is the collective interface a rank programs against. The
// profiler's instrumented communicator implements it too, so a trainer
// written against it can be traced without change.
//
// Every rank of the communicator must call the same collectives in the same
// order; buffers are reduced or overwritten in place. Methods are safe for
// concurrent use, but concurrent collectives must still be started in the
// same order on every rank (their order of start fixes their sequence
// numbers).
type Communicator interface {
	// Rank is this rank's index in the communicator, Size the number of ranks.
	Rank() int
	Size() int

	// AllReduce reduces buf element-wise over all ranks and leaves the
	// result in buf on every rank.
	AllReduce(ctx context.Context, buf Buffer, op ReduceOp) error
	// IAllReduce starts an AllReduce and returns at once; buf must not be
	// touched until the Request completes.
	IAllReduce(ctx context.Context, buf Buffer, op ReduceOp) Request
	// Broadcast copies root's buf into buf on every other rank.
	Broadcast(ctx context.Context, buf Buffer, root int) error
	// IBroadcast starts a Broadcast and returns at once.
	IBroadcast(ctx context.Context, buf Buffer, root int) Request
	// Reduce leaves the element-wise reduction over all ranks in root's
	// buf; other ranks' buffers are left unchanged.
	Reduce(ctx context.Context, buf Buffer, op ReduceOp, root int) error
	// AllGather concatenates every rank's in into out, rank by rank. out
	// holds N elements split evenly (BlockRange); in holds this rank's block.
	AllGather(ctx context.Context, in, out Buffer) error
	// ReduceScatter reduces in (N elements) over all ranks and leaves this
	// rank's block of the result (BlockRange) in out.
	ReduceScatter(ctx context.Context, in, out Buffer, op ReduceOp) error
	// Barrier returns once every rank has entered it.
	Barrier(ctx context.Context) error
	// Send sends buf to rank to with a tag; Recv receives a message of
	// exactly buf's length with that tag from rank from.
	Send(ctx context.Context, buf Buffer, to, tag int) error
	Recv(ctx context.Context, buf Buffer, from, tag int) error
	// Split partitions the communicator like MPI_Comm_split: ranks passing
	// the same color form a new communicator, ordered by key then by rank.
	// A negative color returns nil. Every rank must call it.
	Split(ctx context.Context, color, key int) (Communicator, error)
	// Algorithm returns the algorithm op would use for a buffer of bytes.
	Algorithm(op Op, bytes int) Algo
	// WorldRank maps a rank of this communicator to its rank in the world.
	WorldRank(rank int) int
}

// BlockRange returns the elements [lo, hi) of block i when n elements are
// split over size ranks: blocks differ in length by at most one.
func BlockRange(n, size, i int) (lo, hi int) {
	return int(int64(n) * int64(i) / int64(size)), int(int64(n) * int64(i+1) / int64(size))
}

// Tuning holds the sizes at which automatic algorithm selection switches.
// Sizes are in bytes of the whole buffer.
type Tuning struct {
	// AllReduce uses recursive doubling up to this size (up to
	// AllReduceRecursiveDoublingMax2Ranks on two ranks, where it sends no
	// more than Rabenseifner does)...
	AllReduceRecursiveDoublingMax       int
	AllReduceRecursiveDoublingMax2Ranks int
	// ...then Rabenseifner up to this size when the rank count is a power
	// of two, or up to AllReduceRabenseifnerMaxNonPow2 when it is not (the
	// ranks beyond a power of two cost an extra full-buffer transfer), and
	// the ring above it.
	AllReduceRabenseifnerMax        int
	AllReduceRabenseifnerMaxNonPow2 int
	// Broadcast uses a binomial tree up to this size and a pipelined chain above.
	BroadcastTreeMax int
	// SegmentBytes is the pipelining unit of the ring and the chain.
	SegmentBytes int
}

// DefaultTuning returns the thresholds measured on loopback TCP
// (docs/collectives.md).
func DefaultTuning() Tuning {
	return Tuning{
		AllReduceRecursiveDoublingMax:       32 << 10,
		AllReduceRecursiveDoublingMax2Ranks: 512 << 10,
		AllReduceRabenseifnerMax:            8 << 20,
		AllReduceRabenseifnerMaxNonPow2:     1 << 20,
		BroadcastTreeMax:                    512 << 10,
		SegmentBytes:                        1 << 20,
	}
}

var tuningKeys = map[string]func(*Tuning) *int{
	"allreduce_rd_max":        func(t *Tuning) *int { return &t.AllReduceRecursiveDoublingMax },
	"allreduce_rd_max_2ranks": func(t *Tuning) *int { return &t.AllReduceRecursiveDoublingMax2Ranks },
	"allreduce_rab_max":       func(t *Tuning) *int { return &t.AllReduceRabenseifnerMax },
	"allreduce_rab_max_npow2": func(t *Tuning) *int { return &t.AllReduceRabenseifnerMaxNonPow2 },
	"bcast_tree_max":          func(t *Tuning) *int { return &t.BroadcastTreeMax },
	"segment":                 func(t *Tuning) *int { return &t.SegmentBytes },
}

// Set applies overrides written as "key=size[,key=size...]", with sizes
// such as 64K or 4M; keys are allreduce_rd_max, allreduce_rd_max_2ranks,
// allreduce_rab_max, allreduce_rab_max_npow2, bcast_tree_max and segment.
func (t *Tuning) Set(s string) error {
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		f := tuningKeys[k]
		if !ok || f == nil {
			keys := make([]string, 0, len(tuningKeys))
			for k := range tuningKeys {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			return fmt.Errorf("bad tuning %q: want key=size with key one of %s", kv, strings.Join(keys, ", "))
		}
		n, err := ParseSize(v)
		if err != nil {
			return fmt.Errorf("bad tuning %q: %w", kv, err)
		}
		if k == "segment" && n < 1024 {
			return fmt.Errorf("bad tuning %q: segment must be at least 1K", kv)
		}
		*f(t) = int(n)
	}
	return nil
}

// ParseSize parses a byte count such as 8, 64K, 4M or 1G (powers of 1024).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	if t != "" {
		switch t[len(t)-1] {
		case 'k', 'K':
			mult = 1 << 10
		case 'm', 'M':
			mult = 1 << 20
		case 'g', 'G':
			mult = 1 << 30
		}
		if mult > 1 {
			t = t[:len(t)-1]
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<40)/mult {
		return 0, fmt.Errorf("invalid size %q: want a byte count such as 8, 64K, 4M or 1G", s)
	}
	return n * mult, nil
}

// Config configures a Comm.
type Config struct {
	// Algorithms forces an algorithm for an operation; operations not in
	// the map, or mapped to AlgoAuto, choose by size.
	Algorithms map[Op]Algo
	// Tuning sets the automatic thresholds; the zero value means DefaultTuning.
	Tuning Tuning
	// Trace, if set, is told of the work collectives do inside themselves.
	Trace *Trace
}

// Trace holds hooks that profilers set to see inside collectives, as
// net/http/httptrace does for HTTP. Hooks run on the goroutine that does
// the work, right after it, so their times are where the work happened;
// they must be fast and safe for concurrent use. A nil hook is skipped.
type Trace struct {
	// Reduced is called after a reduction kernel combined bytes of a
	// received chunk into the buffer between start and end. h is the
	// collective's header with the algorithm step in Chunk.
	Reduced func(h Header, bytes int, start, end time.Time)
}

// Comm is the Communicator implementation over a Transport.
type Comm struct {
	t     Transport
	id    uint32
	rank  int
	ranks []int // world rank of each member
	algos map[Op]Algo
	tune  Tuning
	trace *Trace
	seq   atomic.Uint64
}

var _ Communicator = (*Comm)(nil)

// New returns the world communicator of t's ranks. Every rank must use the
// same Config.
func New(t Transport, cfg Config) (*Comm, error) {
	ranks := make([]int, t.Size())
	for i := range ranks {
		ranks[i] = i
	}
	tune := cfg.Tuning
	if tune == (Tuning{}) {
		tune = DefaultTuning()
	}
	if tune.SegmentBytes < 1024 {
		return nil, fmt.Errorf("collectives: segment size %d is below 1K", tune.SegmentBytes)
	}
	algos := make(map[Op]Algo, len(cfg.Algorithms))
	for op, a := range cfg.Algorithms {
		if a == AlgoAuto {
			continue
		}
		ok := false
		for _, b := range Algorithms(op) {
			ok = ok || a == b
		}
		if !ok {
			return nil, fmt.Errorf("collectives: %s has no %s algorithm (have %v)", op, a, Algorithms(op))
		}
		algos[op] = a
	}
	tr := cfg.Trace
	if tr != nil && tr.Reduced == nil {
		tr = nil
	}
	return &Comm{t: t, rank: t.Rank(), ranks: ranks, algos: algos, tune: tune, trace: tr}, nil
}

// Rank returns this rank's index in the communicator.
func (c *Comm) Rank() int { return c.rank }

// Size returns the number of ranks in the communicator.
func (c *Comm) Size() int { return len(c.ranks) }

// ID returns the communicator's id, carried in every message header; the
// world is 0.
func (c *Comm) ID() uint32 { return c.id }

// WorldRank maps a rank of this communicator to its rank in the world.
func (c *Comm) WorldRank(rank int) int { return c.ranks[rank] }

// Seq returns the sequence number the next collective will take.
func (c *Comm) Seq() uint64 { return c.seq.Load() }

// Transport returns the transport the communicator sends through.
func (c *Comm) Transport() Transport { return c.t }

// Algorithm returns the algorithm op uses for a buffer of the given bytes.
func (c *Comm) Algorithm(op Op, bytes int) Algo {
	if a, ok := c.algos[op]; ok {
		return a
	}
	switch op {
	case OpAllReduce:
		p := len(c.ranks)
		rabMax := c.tune.AllReduceRabenseifnerMax
		if p&(p-1) != 0 {
			rabMax = c.tune.AllReduceRabenseifnerMaxNonPow2
		}
		switch {
		case bytes <= c.tune.AllReduceRecursiveDoublingMax || p <= 2 && bytes <= c.tune.AllReduceRecursiveDoublingMax2Ranks:
			return AlgoRecursiveDoubling
		case bytes <= rabMax:
			return AlgoRabenseifner
		}
		return AlgoRing
	case OpBroadcast:
		if bytes <= c.tune.BroadcastTreeMax || len(c.ranks) <= 2 {
			return AlgoTree
		}
		return AlgoChain
	case OpReduce:
		return AlgoTree
	case OpAllGather, OpReduceScatter:
		return AlgoRing
	case OpBarrier:
		return AlgoDissemination
	}
	return AlgoDirect
}

// Request is a collective in flight, as a non-blocking call returns it.
// Its methods are safe for concurrent use.
type Request interface {
	// Wait blocks until the collective completes and returns its error.
	Wait() error
	// Done is closed when the collective completes.
	Done() <-chan struct{}
	// Completed returns when the collective completed on this rank, as
	// stamped by the goroutine that completed it (not by whoever waits
	// on it later); zero while it is in flight.
	Completed() time.Time
}

// request is the Request of a collective run by its own goroutine.
type request struct {
	done chan struct{}
	err  error
	end  time.Time
}

func (r *request) Wait() error {
	<-r.done
	return r.err
}

func (r *request) Done() <-chan struct{} { return r.done }

func (r *request) Completed() time.Time {
	select {
	case <-r.done:
		return r.end
	default:
		return time.Time{}
	}
}

func failed(err error) *request {
	r := &request{done: make(chan struct{}), err: err, end: time.Now()}
	close(r.done)
	return r
}

func start(f func() error) *request {
	r := &request{done: make(chan struct{})}
	go func() {
		r.err = f()
		r.end = time.Now()
		close(r.done)
	}()
	return r
}

// call is one collective in progress.
type call struct {
	c   *Comm
	ctx context.Context
	h   Header
	seg int // pipelining segment in bytes
}

// begin starts a collective: it takes the communicator's next sequence
// number. The call is returned by value, so that a blocking collective
// keeps it on its stack.
func (c *Comm) begin(ctx context.Context, op Op, d DType, bytes int) call {
	h := Header{Comm: c.id, Seq: c.seq.Add(1) - 1, Op: op, Algo: c.Algorithm(op, bytes), DType: d}
	return call{c: c, ctx: ctx, h: h, seg: c.tune.SegmentBytes}
}

func (k *call) wrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s #%d (%s): %w", k.h.Op, k.h.Seq, k.h.Algo, err)
}

func (k *call) send(to, chunk int, p []byte) error {
	h := k.h
	h.Chunk = int32(chunk)
	return k.c.t.Send(k.ctx, k.c.ranks[to], h, p)
}

func (k *call) post(from, chunk int, p []byte) Receive {
	h := k.h
	h.Chunk = int32(chunk)
	return k.c.t.Post(k.c.ranks[from], h, p)
}

// reduce sets dst = dst op src for the algorithm's step chunk, telling the
// trace hook how long it took.
func (k *call) reduce(dst, src []byte, d DType, op ReduceOp, chunk int) {
	if k.c.trace == nil {
		reduceInto(dst, src, d, op)
		return
	}
	t0 := time.Now()
	reduceInto(dst, src, d, op)
	h := k.h
	h.Chunk = int32(chunk)
	k.c.trace.Reduced(h, len(dst), t0, time.Now())
}

func (k *call) recv(from, chunk int, p []byte) error {
	_, err := k.post(from, chunk, p).Wait(k.ctx)
	return err
}

// eagerMax is the block size up to which the ring runs without its
// pipeline goroutines.
const eagerMax = 64 << 10

// sendrecv sends sp to rank to and receives rp from rank from at once. The
// receive is posted first, so the transport fills rp directly while this
// goroutine sends; transports drain every connection, so the send cannot
// block on a receiver that is itself sending.
func (k *call) sendrecv(to int, sp []byte, from int, rp []byte, chunk int) error {
	r := k.post(from, chunk, rp)
	serr := k.send(to, chunk, sp)
	_, rerr := r.Wait(k.ctx)
	if serr != nil {
		return serr
	}
	return rerr
}

func validBuffer(b Buffer) error {
	if b.dtype == 0 || b.dtype.Size() == 0 {
		return errors.New("buffer has no element type; make it with Float32s, Float64s, Int32s or Int64s")
	}
	return nil
}

func validOp(op ReduceOp) error {
	if op < Sum || op > Prod {
		return fmt.Errorf("invalid reduction %v", op)
	}
	return nil
}

func (c *Comm) validRoot(root int) error {
	if root < 0 || root >= len(c.ranks) {
		return fmt.Errorf("root %d is not a rank of this communicator of %d", root, len(c.ranks))
	}
	return nil
}

// AllReduce implements Communicator.
func (c *Comm) AllReduce(ctx context.Context, buf Buffer, op ReduceOp) error {
	if err := errors.Join(validBuffer(buf), validOp(op)); err != nil {
		return fmt.Errorf("allreduce: %w", err)
	}
	k := c.begin(ctx, OpAllReduce, buf.dtype, len(buf.b))
	return c.allReduce(&k, buf, op)
}

// IAllReduce implements Communicator.
func (c *Comm) IAllReduce(ctx context.Context, buf Buffer, op ReduceOp) Request {
	if err := errors.Join(validBuffer(buf), validOp(op)); err != nil {
		return failed(fmt.Errorf("allreduce: %w", err))
	}
	k := c.begin(ctx, OpAllReduce, buf.dtype, len(buf.b))
	return start(func() error { return c.allReduce(&k, buf, op) })
}

func (c *Comm) allReduce(k *call, buf Buffer, op ReduceOp) error {
	if len(c.ranks) == 1 {
		return nil
	}
	var err error
	switch k.h.Algo {
	case AlgoRing:
		err = k.ring(buf.b, buf.dtype, true, true, op)
	case AlgoRecursiveDoubling:
		err = k.recursiveDoubling(buf, op)
	case AlgoRabenseifner:
		err = k.rabenseifner(buf, op)
	case AlgoTree:
		if err = k.treeReduce(buf, op, 0, 0); err == nil {
			err = k.treeBroadcast(buf.b, 0, 64)
		}
	default:
		err = fmt.Errorf("no allreduce algorithm %s", k.h.Algo)
	}
	return k.wrap(err)
}

// Broadcast implements Communicator.
func (c *Comm) Broadcast(ctx context.Context, buf Buffer, root int) error {
	if err := errors.Join(validBuffer(buf), c.validRoot(root)); err != nil {
		return fmt.Errorf("broadcast: %w", err)
	}
	k := c.begin(ctx, OpBroadcast, buf.dtype, len(buf.b))
	return c.broadcast(&k, buf, root)
}

// IBroadcast implements Communicator.
func (c *Comm) IBroadcast(ctx context.Context, buf Buffer, root int) Request {
	if err := errors.Join(validBuffer(buf), c.validRoot(root)); err != nil {
		return failed(fmt.Errorf("broadcast: %w", err))
	}
	k := c.begin(ctx, OpBroadcast, buf.dtype, len(buf.b))
	return start(func() error { return c.broadcast(&k, buf, root) })
}

func (c *Comm) broadcast(k *call, buf Buffer, root int) error {
	if len(c.ranks) == 1 {
		return nil
	}
	if k.h.Algo == AlgoChain {
		return k.wrap(k.chainBroadcast(buf.b, buf.dtype.Size(), root))
	}
	return k.wrap(k.treeBroadcast(buf.b, root, 0))
}

// Reduce implements Communicator.
func (c *Comm) Reduce(ctx context.Context, buf Buffer, op ReduceOp, root int) error {
	if err := errors.Join(validBuffer(buf), validOp(op), c.validRoot(root)); err != nil {
		return fmt.Errorf("reduce: %w", err)
	}
	k := c.begin(ctx, OpReduce, buf.dtype, len(buf.b))
	if len(c.ranks) == 1 {
		return nil
	}
	return k.wrap(k.treeReduce(buf, op, root, 0))
}

// AllGather implements Communicator.
func (c *Comm) AllGather(ctx context.Context, in, out Buffer) error {
	if err := errors.Join(validBuffer(in), validBuffer(out)); err != nil {
		return fmt.Errorf("allgather: %w", err)
	}
	n := len(c.ranks)
	lo, hi := BlockRange(out.Len(), n, c.rank)
	if in.dtype != out.dtype || in.Len() != hi-lo {
		return fmt.Errorf("allgather: rank %d's input holds %d %s, want %d %s (its block of an output of %d over %d ranks)",
			c.rank, in.Len(), in.dtype, hi-lo, out.dtype, out.Len(), n)
	}
	k := c.begin(ctx, OpAllGather, out.dtype, len(out.b))
	copy(out.Slice(lo, hi).b, in.b)
	if n == 1 {
		return nil
	}
	return k.wrap(k.ring(out.b, out.dtype, false, true, 0))
}

// ReduceScatter implements Communicator.
func (c *Comm) ReduceScatter(ctx context.Context, in, out Buffer, op ReduceOp) error {
	if err := errors.Join(validBuffer(in), validBuffer(out), validOp(op)); err != nil {
		return fmt.Errorf("reducescatter: %w", err)
	}
	n := len(c.ranks)
	lo, hi := BlockRange(in.Len(), n, c.rank)
	if in.dtype != out.dtype || out.Len() != hi-lo {
		return fmt.Errorf("reducescatter: rank %d's output holds %d %s, want %d %s (its block of an input of %d over %d ranks)",
			c.rank, out.Len(), out.dtype, hi-lo, in.dtype, in.Len(), n)
	}
	k := c.begin(ctx, OpReduceScatter, in.dtype, len(in.b))
	if n == 1 {
		copy(out.b, in.b)
		return nil
	}
	work := getPayload(len(in.b))
	defer putPayload(work)
	copy(*work, in.b)
	if err := k.ring(*work, in.dtype, true, false, op); err != nil {
		return k.wrap(err)
	}
	s := in.dtype.Size()
	copy(out.b, (*work)[lo*s:hi*s])
	return nil
}

// Barrier implements Communicator.
func (c *Comm) Barrier(ctx context.Context) error {
	k := c.begin(ctx, OpBarrier, Int32, 0)
	n := len(c.ranks)
	for round, dist := 0, 1; dist < n; round, dist = round+1, dist*2 {
		to, from := (c.rank+dist)%n, (c.rank-dist+n)%n
		if err := k.sendrecv(to, nil, from, nil, round); err != nil {
			return k.wrap(err)
		}
	}
	return nil
}

func (c *Comm) p2pHeader(buf Buffer, tag int) (Header, error) {
	if err := validBuffer(buf); err != nil {
		return Header{}, err
	}
	if tag < 0 {
		return Header{}, fmt.Errorf("tag %d is negative", tag)
	}
	return Header{Comm: c.id, Seq: uint64(tag), Op: OpSendRecv, Algo: AlgoDirect, DType: buf.dtype}, nil
}

// Send implements Communicator.
func (c *Comm) Send(ctx context.Context, buf Buffer, to, tag int) error {
	h, err := c.p2pHeader(buf, tag)
	if err == nil {
		err = c.validRoot(to)
	}
	if err != nil {
		return fmt.Errorf("send: %w", err)
	}
	if err := c.t.Send(ctx, c.ranks[to], h, buf.b); err != nil {
		return fmt.Errorf("send to rank %d tag %d: %w", to, tag, err)
	}
	return nil
}

// Recv implements Communicator.
func (c *Comm) Recv(ctx context.Context, buf Buffer, from, tag int) error {
	h, err := c.p2pHeader(buf, tag)
	if err == nil {
		err = c.validRoot(from)
	}
	if err != nil {
		return fmt.Errorf("recv: %w", err)
	}
	if _, err := Recv(ctx, c.t, c.ranks[from], h, buf.b); err != nil {
		return fmt.Errorf("recv from rank %d tag %d: %w", from, tag, err)
	}
	return nil
}

// Split implements Communicator.
func (c *Comm) Split(ctx context.Context, color, key int) (Communicator, error) {
	n := len(c.ranks)
	all := make([]int64, 2*n)
	seq := c.seq.Load()
	if err := c.AllGather(ctx, Int64s([]int64{int64(color), int64(key)}), Int64s(all)); err != nil {
		return nil, fmt.Errorf("split: %w", err)
	}
	if color < 0 {
		return nil, nil
	}
	type member struct{ key, rank int }
	var ms []member
	for r := range n {
		if int(all[2*r]) == color {
			ms = append(ms, member{int(all[2*r+1]), r})
		}
	}
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].key < ms[j].key })
	sub := &Comm{t: c.t, algos: c.algos, tune: c.tune, trace: c.trace, ranks: make([]int, len(ms))}
	for i, m := range ms {
		sub.ranks[i] = c.ranks[m.rank]
		if m.rank == c.rank {
			sub.rank = i
		}
	}
	f := fnv.New32a()
	fmt.Fprintf(f, "%d/%d/%d", c.id, seq, color)
	sub.id = f.Sum32() | 1 // never 0, the world's id
	return sub, nil
}
