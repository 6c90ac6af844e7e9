package trace

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// Codec is the compression of a stream's buffers.
type Codec string

// Codecs.
const (
	Zstd Codec = "zstd" // the default: smallest files
	LZ4  Codec = "lz4"  // larger files, faster to read
	None Codec = "none"
)

// ParseCodec checks a codec name.
func ParseCodec(s string) (Codec, error) {
	switch c := Codec(s); c {
	case Zstd, LZ4, None:
		return c, nil
	case "":
		return Zstd, nil
	}
	return "", fmt.Errorf("unknown codec %q (want zstd, lz4 or none)", s)
}

// WriterOptions configure a Writer.
type WriterOptions struct {
	Codec Codec            // default Zstd
	Alloc memory.Allocator // default memory.DefaultAllocator
}

// Writer writes one rank's events as an Arrow IPC stream, one record batch
// per Write. It is not safe for concurrent use.
type Writer struct {
	w      *ipc.Writer
	mem    memory.Allocator
	info   RankInfo
	schema *arrow.Schema
	// Dictionaries only grow, so each batch's is an extension of the last
	// and the stream carries deltas.
	kinds, names, algos, dtypes, comms memo
	events                             int64
	closed                             bool
}

type memo struct {
	index  map[string]int
	values []string
	max    int
}

func newMemo(max int) memo { return memo{index: map[string]int{}, max: max} }

func (m *memo) id(s string) (int, error) {
	if i, ok := m.index[s]; ok {
		return i, nil
	}
	if len(m.values) >= m.max {
		return 0, fmt.Errorf("trace: more than %d distinct values in one dictionary column", m.max)
	}
	m.index[s] = len(m.values)
	m.values = append(m.values, s)
	return len(m.values) - 1, nil
}

// NewWriter starts a stream on w. The caller closes w after Close.
func NewWriter(w io.Writer, info RankInfo, opt WriterOptions) (*Writer, error) {
	if opt.Alloc == nil {
		opt.Alloc = memory.DefaultAllocator
	}
	if opt.Codec == "" {
		opt.Codec = Zstd
	}
	s := schema(info)
	opts := []ipc.Option{ipc.WithSchema(s), ipc.WithAllocator(opt.Alloc), ipc.WithDictionaryDeltas(true)}
	switch opt.Codec {
	case Zstd:
		opts = append(opts, ipc.WithZstd())
	case LZ4:
		opts = append(opts, ipc.WithLZ4())
	case None:
	default:
		return nil, fmt.Errorf("trace: unknown codec %q", opt.Codec)
	}
	tw := &Writer{w: ipc.NewWriter(w, opts...), mem: opt.Alloc, info: info, schema: s,
		kinds: newMemo(math.MaxInt8), names: newMemo(math.MaxInt32), algos: newMemo(math.MaxInt8),
		dtypes: newMemo(math.MaxInt8), comms: newMemo(math.MaxInt32)}
	return tw, nil
}

// Events returns the number of events written so far.
func (w *Writer) Events() int64 { return w.events }

// Write appends events as one record batch and writes it out.
func (w *Writer) Write(evs []Event) error {
	if w.closed {
		return errors.New("trace: write on a closed writer")
	}
	if len(evs) == 0 {
		return nil
	}
	rec, err := w.record(evs)
	if err != nil {
		return err
	}
	defer rec.Release()
	if err := w.w.Write(rec); err != nil {
		return fmt.Errorf("trace: writing rank %d's batch: %w", w.info.Rank, err)
	}
	w.events += int64(len(evs))
	return nil
}

func (w *Writer) record(evs []Event) (arrow.Record, error) {
	n := len(evs)
	mem := w.mem
	rank := array.NewInt32Builder(mem)
	kind := array.NewInt8Builder(mem)
	name := array.NewInt32Builder(mem)
	start := array.NewInt64Builder(mem)
	dur := array.NewInt64Builder(mem)
	bytes := array.NewInt64Builder(mem)
	peer := array.NewInt32Builder(mem)
	seq := array.NewInt64Builder(mem)
	step := array.NewInt32Builder(mem)
	algo := array.NewInt8Builder(mem)
	dtype := array.NewInt8Builder(mem)
	root := array.NewInt32Builder(mem)
	chunk := array.NewInt32Builder(mem)
	comm := array.NewInt32Builder(mem)
	wait := array.NewInt64Builder(mem)
	value := array.NewFloat64Builder(mem)
	builders := []array.Builder{rank, kind, name, start, dur, bytes, peer, seq, step, algo, dtype, root, chunk, comm, wait, value}
	defer func() {
		for _, b := range builders {
			b.Release()
		}
	}()
	for _, b := range builders {
		b.Reserve(n)
	}
	for i := range evs {
		e := &evs[i]
		k, err1 := w.kinds.id(e.Kind.String())
		nm, err2 := w.names.id(e.Name)
		al, err3 := w.algos.id(e.Algo)
		dt, err4 := w.dtypes.id(e.DType)
		cm, err5 := w.comms.id(e.Comm)
		if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
			return nil, err
		}
		rank.UnsafeAppend(e.Rank)
		kind.UnsafeAppend(int8(k))
		name.UnsafeAppend(int32(nm))
		start.UnsafeAppend(e.Start)
		dur.UnsafeAppend(e.Dur)
		bytes.UnsafeAppend(e.Bytes)
		peer.UnsafeAppend(e.Peer)
		seq.UnsafeAppend(e.Seq)
		step.UnsafeAppend(e.Step)
		algo.UnsafeAppend(int8(al))
		dtype.UnsafeAppend(int8(dt))
		root.UnsafeAppend(e.Root)
		chunk.UnsafeAppend(e.Chunk)
		comm.UnsafeAppend(int32(cm))
		wait.UnsafeAppend(e.Wait)
		value.UnsafeAppend(e.Value)
	}
	cols := make([]arrow.Array, 0, numCols)
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	for i, b := range builders {
		arr := b.NewArray()
		var m *memo
		switch fields[i].Name {
		case ColKind:
			m = &w.kinds
		case ColName:
			m = &w.names
		case ColAlgo:
			m = &w.algos
		case ColDType:
			m = &w.dtypes
		case ColComm:
			m = &w.comms
		}
		if m != nil {
			sb := array.NewStringBuilder(mem)
			sb.AppendValues(m.values, nil)
			d := sb.NewArray()
			sb.Release()
			da := array.NewDictionaryArray(fields[i].Type, arr, d)
			arr.Release()
			d.Release()
			arr = da
		}
		cols = append(cols, arr)
	}
	return array.NewRecord(w.schema, cols, int64(n)), nil
}

// Close ends the stream (writing the end-of-stream marker that tells a
// finished rank from a cut one). It does not close the underlying writer.
func (w *Writer) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	if err := w.w.Close(); err != nil {
		return fmt.Errorf("trace: closing rank %d's stream: %w", w.info.Rank, err)
	}
	return nil
}
