package load

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/commprof/commprof/trace"
)

// Keep says which events Load keeps in memory while it summarizes a run,
// for a view that can only be built once the summary is final (the
// report's timeline needs the run's span and its steps): Run.Replay then
// feeds them from memory, and the run is read and decoded once.
//
// Kept events are packed column by column, each column of a chunk of
// events in the fewest bytes that hold its range: 17 to 23 bytes an event
// for the twelve columns of a timeline.
// When they would take more than Budget bytes, Load drops them all and
// Replay reads the run's streams a second time, decoding only Columns.
type Keep struct {
	// Kinds are the kinds of the events kept; others are dropped.
	Kinds []trace.Kind
	// Columns are the columns kept (trace.Col* names): any but value and
	// label. The rank column, when asked for, is the stream's rank.
	Columns []string
	// Budget bounds the bytes the kept events take (0: DefaultBudget).
	Budget int64
}

// DefaultBudget is the memory Keep allows by default: about 4 million
// events of a timeline (docs/benchmarks.md, "Reading a run once").
const DefaultBudget = 64 << 20

// chunkRows is how many kept events are packed together.
const chunkRows = 8192

// colKind tells how a kept column is stored.
type colKind uint8

const (
	col32   colKind = iota // an int32 column
	col64                  // an int64 column
	colKnd                 // the kind column
	colDict                // an int32 column of indices into a dictionary
)

// keptCol describes a column Keep can hold and where it is in a Batch.
type keptCol struct {
	kind colKind
	i32  func(*trace.Batch) *[]int32
	i64  func(*trace.Batch) *[]int64
	dict func(*trace.Batch) *[]string // for colDict
}

var keepable = map[string]keptCol{
	trace.ColRank:  {kind: col32, i32: func(b *trace.Batch) *[]int32 { return &b.Rank }},
	trace.ColKind:  {kind: colKnd},
	trace.ColName:  {kind: colDict, i32: func(b *trace.Batch) *[]int32 { return &b.Name }, dict: func(b *trace.Batch) *[]string { return &b.Names }},
	trace.ColStart: {kind: col64, i64: func(b *trace.Batch) *[]int64 { return &b.Start }},
	trace.ColDur:   {kind: col64, i64: func(b *trace.Batch) *[]int64 { return &b.Dur }},
	trace.ColBytes: {kind: col64, i64: func(b *trace.Batch) *[]int64 { return &b.Bytes }},
	trace.ColPeer:  {kind: col32, i32: func(b *trace.Batch) *[]int32 { return &b.Peer }},
	trace.ColSeq:   {kind: col64, i64: func(b *trace.Batch) *[]int64 { return &b.Seq }},
	trace.ColStep:  {kind: col32, i32: func(b *trace.Batch) *[]int32 { return &b.Step }},
	trace.ColAlgo:  {kind: colDict, i32: func(b *trace.Batch) *[]int32 { return &b.Algo }, dict: func(b *trace.Batch) *[]string { return &b.Algos }},
	trace.ColDType: {kind: colDict, i32: func(b *trace.Batch) *[]int32 { return &b.DType }, dict: func(b *trace.Batch) *[]string { return &b.DTypes }},
	trace.ColRoot:  {kind: col32, i32: func(b *trace.Batch) *[]int32 { return &b.Root }},
	trace.ColChunk: {kind: col32, i32: func(b *trace.Batch) *[]int32 { return &b.Chunk }},
	trace.ColComm:  {kind: colDict, i32: func(b *trace.Batch) *[]int32 { return &b.Comm }, dict: func(b *trace.Batch) *[]string { return &b.Comms }},
	trace.ColWait:  {kind: col64, i64: func(b *trace.Batch) *[]int64 { return &b.Wait }},
}

// check says what is wrong with k, if anything, and returns its columns
// with kind among them, without repeats.
func (k *Keep) check() ([]string, error) {
	if k.Budget < 0 {
		return nil, fmt.Errorf("load: a negative budget (%d bytes) for the events kept", k.Budget)
	}
	cols := []string{trace.ColKind}
	for _, c := range k.Columns {
		if _, ok := keepable[c]; !ok {
			return nil, fmt.Errorf("load: column %q cannot be kept (Keep holds %v)", c, keepableNames())
		}
		if !slices.Contains(cols, c) {
			cols = append(cols, c)
		}
	}
	return cols, nil
}

func keepableNames() []string {
	var out []string
	for c := range keepable {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// packed is one column of a chunk: each value as its offset from base in
// width bytes (0: every value is base), little-endian, followed by 8
// bytes of padding so that every value can be read with one 8-byte load.
type packed struct {
	base  int64
	width uint8
	data  []byte
}

// packedOverhead is what a packed column costs besides its data.
const packedOverhead = 8 + 8 + 24

func pack[T ~int32 | ~int64 | ~uint8](vals []T) packed {
	if len(vals) == 0 {
		return packed{}
	}
	lo, hi := int64(vals[0]), int64(vals[0])
	for _, v := range vals[1:] {
		lo, hi = min(lo, int64(v)), max(hi, int64(v))
	}
	p := packed{base: lo}
	span := uint64(hi) - uint64(lo)
	if span == 0 {
		return p
	}
	p.width = uint8((bits.Len64(span) + 7) / 8)
	w := int(p.width)
	p.data = make([]byte, w*len(vals)+8)
	base := uint64(lo)
	// Each 8-byte store writes the value's width bytes and zeros past
	// them, which the next value's store overwrites.
	for i, v := range vals {
		binary.LittleEndian.PutUint64(p.data[w*i:], uint64(int64(v))-base)
	}
	return p
}

func unpack[T ~int32 | ~int64 | ~uint8](p packed, n int, dst []T) []T {
	if cap(dst) < n {
		dst = make([]T, n)
	}
	dst = dst[:n]
	if p.width == 0 {
		for i := range dst {
			dst[i] = T(p.base)
		}
		return dst
	}
	base, w := uint64(p.base), int(p.width)
	mask := ^uint64(0) >> (64 - 8*w)
	for i := range dst {
		dst[i] = T(int64(base + binary.LittleEndian.Uint64(p.data[w*i:])&mask))
	}
	return dst
}

// chunk is up to chunkRows kept events of one stream.
type chunk struct {
	n     int
	cols  []packed   // as keeper.cols
	dicts [][]string // for each colDict column, its dictionary as the chunk's indices need it
}

// keeper keeps one stream's events. It is used by one goroutine at a time.
type keeper struct {
	cols   []string
	descs  []keptCol
	kinds  [256]bool
	shared *budget
	dead   bool // the run's events went over the budget: keep nothing

	rows   []int32   // scratch: the rows of a batch that are kept
	stage  [][]int64 // rows not packed yet, per column, widened to int64
	dicts  [][]string
	chunks []chunk
}

// budget is what the keepers of one run share.
type budget struct {
	max, used atomic.Int64
	events    atomic.Int64
	over      atomic.Bool
}

func (b *budget) add(bytes, events int64) {
	if b.used.Add(bytes) > b.max.Load() {
		b.over.Store(true)
	}
	b.events.Add(events)
}

func newKeeper(cols []string, kinds []trace.Kind, shared *budget) *keeper {
	// The stage is taken from stagePool when rows come, and given back
	// when the stream is read (finish): a run of thousands of streams
	// holds the stages of the streams being read.
	k := &keeper{cols: cols, shared: shared, stage: make([][]int64, len(cols)), dicts: make([][]string, len(cols))}
	for _, c := range cols {
		k.descs = append(k.descs, keepable[c])
	}
	for _, kd := range kinds {
		k.kinds[kd] = true
	}
	return k
}

// add keeps the batch's events of the kept kinds; b has every kept
// column decoded.
func (k *keeper) add(b *trace.Batch) {
	if k.dead || k.shared.over.Load() {
		k.drop()
		return
	}
	k.rows = k.rows[:0]
	for i, kd := range b.Kind[:b.Len] {
		if k.kinds[kd] {
			k.rows = append(k.rows, int32(i))
		}
	}
	if len(k.rows) == 0 {
		return
	}
	// A dictionary that does not continue the one kept so far (a stream
	// that replaced it) starts a new chunk, whose indices refer to it.
	for c, d := range k.descs {
		if d.kind != colDict {
			continue
		}
		in, cur := *d.dict(b), k.dicts[c]
		if len(in) >= len(cur) && (len(cur) == 0 || in[len(cur)-1] == cur[len(cur)-1]) {
			continue
		}
		k.flush()
		k.dicts[c] = nil
	}
	for c, d := range k.descs {
		if d.kind == colDict {
			// Appending never changes what a packed chunk's dictionary,
			// a shorter slice of the same values, holds.
			if in := *d.dict(b); len(in) > len(k.dicts[c]) {
				k.dicts[c] = append(k.dicts[c], in[len(k.dicts[c]):]...)
			}
		}
	}
	// Copy the kept rows into the stage, column by column, a chunk's worth
	// at a time; a batch whose every row is kept is copied as a range.
	all := len(k.rows) == b.Len
	for done := 0; done < len(k.rows); {
		at := len(k.stage[0])
		n := min(len(k.rows)-done, chunkRows-at)
		rows := k.rows[done : done+n]
		for c, d := range k.descs {
			if k.stage[c] == nil {
				k.stage[c] = (*stagePool.Get().(*[]int64))[:0]
			}
			st := k.stage[c][:at+n]
			dst := st[at:]
			switch d.kind {
			case col32, colDict:
				v := *d.i32(b)
				if all {
					for j, x := range v[done : done+n] {
						dst[j] = int64(x)
					}
				} else {
					for j, r := range rows {
						dst[j] = int64(v[r])
					}
				}
			case col64:
				v := *d.i64(b)
				if all {
					copy(dst, v[done:done+n])
				} else {
					for j, r := range rows {
						dst[j] = v[r]
					}
				}
			case colKnd:
				for j, r := range rows {
					dst[j] = int64(b.Kind[r])
				}
			}
			k.stage[c] = st
		}
		done += n
		if len(k.stage[0]) == chunkRows {
			k.flush()
		}
	}
}

// flush packs the staged rows into a chunk.
func (k *keeper) flush() {
	if k.dead || len(k.stage[0]) == 0 {
		return
	}
	n := len(k.stage[0])
	ch := chunk{n: n, cols: make([]packed, len(k.cols))}
	size := int64(64)
	for c := range k.cols {
		ch.cols[c] = pack(k.stage[c])
		size += packedOverhead + int64(len(ch.cols[c].data))
		k.stage[c] = k.stage[c][:0]
	}
	for c, d := range k.descs {
		if d.kind == colDict {
			ch.dicts = append(ch.dicts, k.dicts[c])
			size += 24
		}
	}
	k.chunks = append(k.chunks, ch)
	k.shared.add(size, int64(n))
}

// finish packs the rows staged once the stream is read, and lets the
// stage go: a stream's stage takes up to chunkRows events of every kept
// column (768 KiB for a timeline's), and 512 streams' stages held to the
// end of the read took 388 MB.
func (k *keeper) finish() {
	k.flush()
	for c, st := range k.stage {
		if st != nil {
			stagePool.Put(&st)
		}
		k.stage[c] = nil
	}
	k.rows = nil
}

// stagePool holds the columns of stages let go, for the streams read
// after: a stream's stage is taken when its first kept event comes.
var stagePool = sync.Pool{New: func() any {
	s := make([]int64, 0, chunkRows)
	return &s
}}

// drop gives up keeping: the run is over the budget.
func (k *keeper) drop() {
	k.dead = true
	k.chunks, k.stage, k.rows, k.dicts = nil, nil, nil, nil
}

// replay feeds the kept chunks to fn as batches that hold the kept
// columns; the batch and its slices are reused from one call to the next.
func (k *keeper) replay(ctx context.Context, fn func(*trace.Batch)) {
	var b trace.Batch
	for _, ch := range k.chunks {
		if ctx.Err() != nil {
			return
		}
		b = trace.Batch{Len: ch.n, Rank: b.Rank, Kind: b.Kind, Name: b.Name, Algo: b.Algo, DType: b.DType, Comm: b.Comm,
			Peer: b.Peer, Step: b.Step, Root: b.Root, Chunk: b.Chunk, Start: b.Start, Dur: b.Dur, Bytes: b.Bytes, Seq: b.Seq, Wait: b.Wait}
		dict := 0
		for c, d := range k.descs {
			p := ch.cols[c]
			switch d.kind {
			case col32:
				f := d.i32(&b)
				*f = unpack(p, ch.n, *f)
			case colDict:
				f := d.i32(&b)
				*f = unpack(p, ch.n, *f)
				*d.dict(&b) = ch.dicts[dict]
				dict++
			case col64:
				f := d.i64(&b)
				*f = unpack(p, ch.n, *f)
			case colKnd:
				b.Kind = unpack(p, ch.n, b.Kind)
			}
		}
		fn(&b)
	}
}
