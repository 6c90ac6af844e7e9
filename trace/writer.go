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
	cols                               cols
	events                             int64
	closed                             bool
}

type memo struct {
	index  map[string]int
	values []string
	last   int
	max    int
}

func newMemo(max int) memo { return memo{index: map[string]int{}, max: max} }

func (m *memo) id(s string) (int, error) {
	if len(m.values) > 0 && s == m.values[m.last] {
		return m.last, nil // runs of one value are the common case
	}
	if i, ok := m.index[s]; ok {
		m.last = i
		return i, nil
	}
	if len(m.values) >= m.max {
		return 0, fmt.Errorf("trace: more than %d distinct values in one dictionary column", m.max)
	}
	m.index[s] = len(m.values)
	m.values = append(m.values, s)
	m.last = len(m.values) - 1
	return m.last, nil
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

// cols holds one batch's columns as Go slices, reused from batch to
// batch; the Arrow arrays of a batch are views of them.
type cols struct {
	rank, name, peer, step, root, chunk, comm []int32
	kind, algo, dtype                         []int8
	start, dur, bytes, seq, wait              []int64
	value                                     []float64
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

func (c *cols) resize(n int) {
	c.rank, c.name, c.peer, c.step = grow(c.rank, n), grow(c.name, n), grow(c.peer, n), grow(c.step, n)
	c.root, c.chunk, c.comm = grow(c.root, n), grow(c.chunk, n), grow(c.comm, n)
	c.kind, c.algo, c.dtype = grow(c.kind, n), grow(c.algo, n), grow(c.dtype, n)
	c.start, c.dur, c.bytes, c.seq, c.wait = grow(c.start, n), grow(c.dur, n), grow(c.bytes, n), grow(c.seq, n), grow(c.wait, n)
	c.value = grow(c.value, n)
}

func (w *Writer) record(evs []Event) (arrow.Record, error) {
	n := len(evs)
	c := &w.cols
	c.resize(n)
	for i := range evs {
		e := &evs[i]
		k, err1 := w.kinds.id(e.Kind.String())
		nm, err2 := w.names.id(e.Name)
		al, err3 := w.algos.id(e.Algo)
		dt, err4 := w.dtypes.id(e.DType)
		cm, err5 := w.comms.id(e.Comm)
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil || err5 != nil {
			return nil, errors.Join(err1, err2, err3, err4, err5)
		}
		c.rank[i], c.kind[i], c.name[i], c.start[i], c.dur[i], c.bytes[i] = e.Rank, int8(k), int32(nm), e.Start, e.Dur, e.Bytes
		c.peer[i], c.seq[i], c.step[i], c.algo[i], c.dtype[i], c.root[i] = e.Peer, e.Seq, e.Step, int8(al), int8(dt), e.Root
		c.chunk[i], c.comm[i], c.wait[i], c.value[i] = e.Chunk, int32(cm), e.Wait, e.Value
	}
	arrs := []arrow.Array{
		primitive(arrow.PrimitiveTypes.Int32, arrow.Int32Traits.CastToBytes(c.rank), n),
		w.dictionary(1, arrow.PrimitiveTypes.Int8, arrow.Int8Traits.CastToBytes(c.kind), &w.kinds, n),
		w.dictionary(2, arrow.PrimitiveTypes.Int32, arrow.Int32Traits.CastToBytes(c.name), &w.names, n),
		primitive(arrow.PrimitiveTypes.Int64, arrow.Int64Traits.CastToBytes(c.start), n),
		primitive(arrow.PrimitiveTypes.Int64, arrow.Int64Traits.CastToBytes(c.dur), n),
		primitive(arrow.PrimitiveTypes.Int64, arrow.Int64Traits.CastToBytes(c.bytes), n),
		primitive(arrow.PrimitiveTypes.Int32, arrow.Int32Traits.CastToBytes(c.peer), n),
		primitive(arrow.PrimitiveTypes.Int64, arrow.Int64Traits.CastToBytes(c.seq), n),
		primitive(arrow.PrimitiveTypes.Int32, arrow.Int32Traits.CastToBytes(c.step), n),
		w.dictionary(9, arrow.PrimitiveTypes.Int8, arrow.Int8Traits.CastToBytes(c.algo), &w.algos, n),
		w.dictionary(10, arrow.PrimitiveTypes.Int8, arrow.Int8Traits.CastToBytes(c.dtype), &w.dtypes, n),
		primitive(arrow.PrimitiveTypes.Int32, arrow.Int32Traits.CastToBytes(c.root), n),
		primitive(arrow.PrimitiveTypes.Int32, arrow.Int32Traits.CastToBytes(c.chunk), n),
		w.dictionary(13, arrow.PrimitiveTypes.Int32, arrow.Int32Traits.CastToBytes(c.comm), &w.comms, n),
		primitive(arrow.PrimitiveTypes.Int64, arrow.Int64Traits.CastToBytes(c.wait), n),
		primitive(arrow.PrimitiveTypes.Float64, arrow.Float64Traits.CastToBytes(c.value), n),
	}
	defer func() {
		for _, a := range arrs {
			a.Release()
		}
	}()
	return array.NewRecord(w.schema, arrs, int64(n)), nil
}

// primitive wraps Go memory as an Arrow array without copying; the memory
// must stay untouched until the batch is written.
func primitive(t arrow.DataType, b []byte, n int) arrow.Array {
	data := array.NewData(t, n, []*memory.Buffer{nil, memory.NewBufferBytes(b)}, nil, 0, 0)
	defer data.Release()
	return array.MakeFromData(data)
}

// dictionary builds column i from its indices and the memo's values so far.
func (w *Writer) dictionary(i int, index arrow.DataType, b []byte, m *memo, n int) arrow.Array {
	idx := primitive(index, b, n)
	defer idx.Release()
	sb := array.NewStringBuilder(w.mem)
	defer sb.Release()
	sb.AppendValues(m.values, nil)
	d := sb.NewArray()
	defer d.Release()
	return array.NewDictionaryArray(fields[i].Type, idx, d)
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
