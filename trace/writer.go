package trace

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"

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

// Level is how hard a codec works.
type Level uint8

// Levels. LevelSmallest costs several times the CPU of LevelFast for
// files about a tenth smaller; it is what Compact uses, once, at the end
// of a run. It matters for zstd only.
const (
	LevelFast Level = iota // the default, for streams written as a run goes
	LevelSmallest
)

// WriterOptions configure a Writer.
type WriterOptions struct {
	Codec Codec            // default Zstd
	Level Level            // default LevelFast
	Alloc memory.Allocator // for the schema, which Arrow writes; default memory.DefaultAllocator
}

// Writer writes one rank's events as an Arrow IPC stream, one record batch
// per Write. It is not safe for concurrent use.
type Writer struct {
	enc  *encoder
	info RankInfo
	// Dictionaries only grow, so each batch's is an extension of the last
	// and the stream carries deltas.
	kinds, names, algos, dtypes, comms, labels memo
	dictIDs                                    [numCols]int64
	sent                                       [numCols]int // dictionary values written so far
	started                                    [numCols]bool
	cols                                       cols
	events, batches                            int64
	closed                                     bool
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

// NewWriter starts a stream on w, writing its schema. The caller closes w
// after Close.
func NewWriter(w io.Writer, info RankInfo, opt WriterOptions) (*Writer, error) {
	if opt.Alloc == nil {
		opt.Alloc = memory.DefaultAllocator
	}
	if opt.Codec == "" {
		opt.Codec = Zstd
	}
	if _, err := ParseCodec(string(opt.Codec)); err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	// Arrow's writer makes the schema message: a stream of no batches is
	// the schema and the end-of-stream marker.
	var sb bytes.Buffer
	aw := ipc.NewWriter(&sb, ipc.WithSchema(schema(info)), ipc.WithAllocator(opt.Alloc))
	if err := aw.Close(); err != nil {
		return nil, fmt.Errorf("trace: writing the schema: %w", err)
	}
	msg := sb.Bytes()
	if len(msg) < 16 {
		return nil, fmt.Errorf("trace: Arrow wrote a %d-byte schema", len(msg))
	}
	msg = msg[:len(msg)-8] // the end-of-stream marker
	ids, err := dictionaryIDs(msg[8:], len(fields))
	if err != nil {
		return nil, err
	}
	enc, err := newEncoder(w, opt.Codec, opt.Level)
	if err != nil {
		return nil, err
	}
	tw := &Writer{enc: enc, info: info,
		kinds: newMemo(math.MaxInt8), names: newMemo(math.MaxInt32), algos: newMemo(math.MaxInt8),
		dtypes: newMemo(math.MaxInt8), comms: newMemo(math.MaxInt32), labels: newMemo(math.MaxInt32)}
	copy(tw.dictIDs[:], ids)
	if _, err := w.Write(msg); err != nil {
		return nil, fmt.Errorf("trace: writing rank %d's schema: %w", info.Rank, err)
	}
	return tw, nil
}

// Events returns the number of events written so far.
func (w *Writer) Events() int64 { return w.events }

// Batches returns the number of record batches written so far.
func (w *Writer) Batches() int64 { return w.batches }

// Write appends events as one record batch and writes it out.
func (w *Writer) Write(evs []Event) error {
	if w.closed {
		return errors.New("trace: write on a closed writer")
	}
	if len(evs) == 0 {
		return nil
	}
	for i := range evs {
		// A reader refuses a stream whose rows name another rank, so the
		// writer does too, before writing anything of the batch.
		if int(evs[i].Rank) != w.info.Rank {
			return fmt.Errorf("trace: event %d of the batch is rank %d's; this stream is rank %d's", i, evs[i].Rank, w.info.Rank)
		}
		if p := evs[i].Peer; p < -1 || int(p) >= w.info.WorldSize {
			return fmt.Errorf("trace: event %d of the batch has peer %d; the world has %d ranks", i, p, w.info.WorldSize)
		}
	}
	if err := w.write(evs); err != nil {
		return fmt.Errorf("trace: writing rank %d's batch: %w", w.info.Rank, err)
	}
	w.events += int64(len(evs))
	w.batches++
	return nil
}

// cols holds one batch's columns as Go slices, reused from batch to
// batch; the Arrow arrays of a batch are views of them.
type cols struct {
	rank, name, peer, step, root, chunk, comm, label []int32
	kind, algo, dtype                                []int8
	start, dur, bytes, seq, wait                     []int64
	value                                            []float64
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

func (c *cols) resize(n int) {
	c.rank, c.name, c.peer, c.step = grow(c.rank, n), grow(c.name, n), grow(c.peer, n), grow(c.step, n)
	c.root, c.chunk, c.comm, c.label = grow(c.root, n), grow(c.chunk, n), grow(c.comm, n), grow(c.label, n)
	c.kind, c.algo, c.dtype = grow(c.kind, n), grow(c.algo, n), grow(c.dtype, n)
	c.start, c.dur, c.bytes, c.seq, c.wait = grow(c.start, n), grow(c.dur, n), grow(c.bytes, n), grow(c.seq, n), grow(c.wait, n)
	c.value = grow(c.value, n)
}

// write encodes evs as one record batch, after the dictionary values it
// adds.
func (w *Writer) write(evs []Event) error {
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
		lb, err6 := w.labels.id(e.Label)
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil || err5 != nil || err6 != nil {
			return errors.Join(err1, err2, err3, err4, err5, err6)
		}
		c.rank[i], c.kind[i], c.name[i], c.start[i], c.dur[i], c.bytes[i] = e.Rank, int8(k), int32(nm), e.Start, e.Dur, e.Bytes
		c.peer[i], c.seq[i], c.step[i], c.algo[i], c.dtype[i], c.root[i] = e.Peer, e.Seq, e.Step, int8(al), int8(dt), e.Root
		c.chunk[i], c.comm[i], c.wait[i], c.value[i], c.label[i] = e.Chunk, int32(cm), e.Wait, e.Value, int32(lb)
	}
	for _, d := range [...]struct {
		col int
		m   *memo
	}{{1, &w.kinds}, {2, &w.names}, {9, &w.algos}, {10, &w.dtypes}, {13, &w.comms}, {colLabel, &w.labels}} {
		col, m := d.col, d.m
		if w.started[col] && len(m.values) == w.sent[col] {
			continue
		}
		if err := w.enc.dictionary(w.dictIDs[col], m.values[w.sent[col]:], w.started[col]); err != nil {
			return err
		}
		w.started[col], w.sent[col] = true, len(m.values)
	}
	e := w.enc
	e.reset()
	for _, b := range [numCols][]byte{bytesOf(c.rank), bytesOf(c.kind), bytesOf(c.name), bytesOf(c.start),
		bytesOf(c.dur), bytesOf(c.bytes), bytesOf(c.peer), bytesOf(c.seq), bytesOf(c.step), bytesOf(c.algo),
		bytesOf(c.dtype), bytesOf(c.root), bytesOf(c.chunk), bytesOf(c.comm), bytesOf(c.wait), bytesOf(c.value), bytesOf(c.label)} {
		e.column(n, b)
	}
	return e.message(msgRecordBatch, e.recordBatch(n))
}

// Close ends the stream (writing the end-of-stream marker that tells a
// finished rank from a cut one). It does not close the underlying writer.
func (w *Writer) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	if err := w.enc.close(); err != nil {
		return fmt.Errorf("trace: closing rank %d's stream: %w", w.info.Rank, err)
	}
	return nil
}
