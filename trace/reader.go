package trace

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// Errors callers tell apart.
var (
	// ErrNotTrace: the input is not a commprof trace (not Arrow IPC, or
	// Arrow without the v1 columns).
	ErrNotTrace = errors.New("not a commprof trace")
	// ErrVersion: a commprof trace of a format version this build does not read.
	ErrVersion = errors.New("unsupported trace format version")
	// ErrTruncated: the stream was cut (its rank was killed); every batch
	// before the cut was returned.
	ErrTruncated = errors.New("trace stream was cut")
)

// TruncatedError says where a stream was cut.
type TruncatedError struct {
	Batches int   // complete batches read
	Events  int64 // events in them
	Bytes   int64 // bytes of the stream read
	Err     error // what the cut looked like
}

func (e *TruncatedError) Error() string {
	s := fmt.Sprintf("trace stream was cut after %d complete batches (%d events, %d bytes read): the rank stopped without closing its trace", e.Batches, e.Events, e.Bytes)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *TruncatedError) Is(target error) bool { return target == ErrTruncated }
func (e *TruncatedError) Unwrap() error        { return e.Err }

// ReaderOptions configure a Reader.
type ReaderOptions struct {
	Alloc memory.Allocator // default memory.DefaultAllocator
	// Limit bounds any single allocation the decoder makes, in bytes, so a
	// corrupt length cannot exhaust memory (default 1 GiB; ReadFile uses
	// the file's size).
	Limit int64
}

// Reader reads one rank's stream, one batch at a time. It is not safe for
// concurrent use; the caller must call Release.
type Reader struct {
	r       *ipc.Reader
	src     *eosReader
	guard   *messageGuard
	info    RankInfo
	cols    [numCols]int
	batches int
	events  int64
	done    bool
}

// NewReader reads and checks the stream's schema and metadata.
func NewReader(r io.Reader, opt ReaderOptions) (rd *Reader, err error) {
	if opt.Alloc == nil {
		opt.Alloc = memory.DefaultAllocator
	}
	if opt.Limit <= 0 {
		opt.Limit = 1 << 30
	}
	guard := newMessageGuard(r, opt.Limit)
	src := &eosReader{r: guard}
	defer func() {
		if p := recover(); p != nil {
			rd, err = nil, fmt.Errorf("%w: %v", ErrNotTrace, p)
		}
	}()
	ir, err := ipc.NewReader(src, ipc.WithAllocator(&limitAlloc{opt.Alloc, opt.Limit}))
	if err != nil {
		if src.n == 0 {
			return nil, fmt.Errorf("%w: the stream is empty", ErrNotTrace)
		}
		return nil, fmt.Errorf("%w: %v", ErrNotTrace, err)
	}
	cols, err := columns(ir.Schema())
	if err == nil {
		var info RankInfo
		if info, err = infoFrom(ir.Schema()); err == nil {
			return &Reader{r: ir, src: src, guard: guard, info: info, cols: cols}, nil
		}
	}
	ir.Release()
	guard.close()
	return nil, err
}

// Info returns the rank's facts from the schema metadata.
func (r *Reader) Info() RankInfo { return r.info }

// Next appends the next batch's events to dst. It returns io.EOF after the
// last batch of a complete stream, and a *TruncatedError (ErrTruncated) if
// the stream was cut.
func (r *Reader) Next(dst []Event) ([]Event, error) {
	if r.done {
		return dst, io.EOF
	}
	out, err := r.next(dst)
	if err != nil {
		r.done = true
	}
	return out, err
}

func (r *Reader) next(dst []Event) (out []Event, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = dst, r.cut(fmt.Errorf("corrupt batch: %v", p))
		}
	}()
	if !r.r.Next() {
		if err := r.r.Err(); err != nil {
			return dst, r.cut(err)
		}
		if !r.src.sawEOS() {
			return dst, r.cut(nil)
		}
		return dst, io.EOF
	}
	rec := r.r.Record()
	n0 := len(dst)
	dst, err = decode(rec, &r.cols, dst)
	if err != nil {
		return dst[:n0], r.cut(err)
	}
	r.batches++
	r.events += int64(len(dst) - n0)
	return dst, nil
}

func (r *Reader) cut(err error) error {
	return &TruncatedError{Batches: r.batches, Events: r.events, Bytes: r.src.n, Err: err}
}

// Release frees the reader's buffers.
func (r *Reader) Release() {
	r.r.Release()
	r.guard.close()
}

// ReadFile reads a whole rank stream from path. If the stream was cut it
// returns every complete batch's events together with a *TruncatedError.
func ReadFile(path string) (RankInfo, []Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return RankInfo{}, nil, fmt.Errorf("opening trace: %w", err)
	}
	defer f.Close()
	var limit int64 = 1 << 30
	if st, err := f.Stat(); err == nil {
		limit = st.Size() + 1<<20
	}
	r, err := NewReader(bufio.NewReaderSize(f, 1<<20), ReaderOptions{Limit: limit})
	if err != nil {
		return RankInfo{}, nil, fmt.Errorf("reading trace %s: %w", path, err)
	}
	defer r.Release()
	evs, err := r.ReadAll()
	if err != nil {
		err = fmt.Errorf("reading trace %s: %w", path, err)
	}
	return r.Info(), evs, err
}

// ReadAll reads the remaining batches. If the stream was cut it returns
// every complete batch's events together with a *TruncatedError.
func (r *Reader) ReadAll() ([]Event, error) {
	// Batches are read into slices of their own and joined once: growing
	// one slice batch by batch spends most of the time copying and zeroing.
	var batches [][]Event
	total := 0
	var err error
	for {
		var b []Event
		b, err = r.Next(nil)
		total += len(b)
		if len(b) > 0 {
			batches = append(batches, b)
		}
		if err != nil {
			break
		}
	}
	if err == io.EOF {
		err = nil
	}
	if len(batches) == 1 {
		return batches[0], err
	}
	evs := make([]Event, 0, total)
	for _, b := range batches {
		evs = append(evs, b...)
	}
	return evs, err
}

func decode(rec arrow.Record, cols *[numCols]int, dst []Event) ([]Event, error) {
	n := int(rec.NumRows())
	if err := checkRows(rec, cols, n); err != nil {
		return dst, err
	}
	var err error
	col := func(i int) arrow.Array { return rec.Column(cols[i]) }
	bad := func(i int) {
		if err == nil {
			err = fmt.Errorf("column %s is %T of %d rows in a batch of %d", fields[i].Name, col(i), col(i).Len(), n)
		}
	}
	i32 := func(i int) []int32 {
		if a, ok := col(i).(*array.Int32); ok && a.Len() == n && a.NullN() == 0 {
			return a.Int32Values()
		}
		bad(i)
		return make([]int32, n)
	}
	i64 := func(i int) []int64 {
		if a, ok := col(i).(*array.Int64); ok && a.Len() == n && a.NullN() == 0 {
			return a.Int64Values()
		}
		bad(i)
		return make([]int64, n)
	}
	// dict returns a dictionary column as indices into its values; every
	// index is checked here, so the loop below cannot go out of range.
	dict := func(i int) ([]int32, []string) {
		idx := make([]int32, n)
		d, ok := col(i).(*array.Dictionary)
		if !ok || d.Len() != n || d.NullN() != 0 {
			bad(i)
			return idx, []string{""}
		}
		vals, ok := d.Dictionary().(*array.String)
		if !ok || vals.Len() == 0 {
			bad(i)
			return idx, []string{""}
		}
		strs := make([]string, vals.Len())
		for j := range strs {
			strs[j] = vals.Value(j)
		}
		switch ix := d.Indices().(type) {
		case *array.Int8:
			for j, k := range ix.Int8Values() {
				idx[j] = int32(k)
			}
		case *array.Int32:
			copy(idx, ix.Int32Values())
		default:
			bad(i)
		}
		for _, k := range idx {
			if k < 0 || int(k) >= len(strs) {
				if err == nil {
					err = fmt.Errorf("column %s: dictionary index %d out of %d values", fields[i].Name, k, len(strs))
				}
				return make([]int32, n), []string{""}
			}
		}
		return idx, strs
	}
	rank, start, dur, bytes := i32(0), i64(3), i64(4), i64(5)
	peer, seq, step := i32(6), i64(7), i32(8)
	root, chunk, wait := i32(11), i32(12), i64(14)
	kindIx, kindStr := dict(1)
	nameIx, names := dict(2)
	algoIx, algos := dict(9)
	dtypeIx, dtypes := dict(10)
	commIx, comms := dict(13)
	var value []float64
	if a, ok := col(15).(*array.Float64); ok && a.Len() == n {
		value = a.Float64Values()
	} else {
		bad(15)
	}
	if err != nil {
		return dst, err
	}
	kinds := make([]Kind, len(kindStr))
	for j, k := range kindStr {
		if kinds[j], err = ParseKind(k); err != nil {
			return dst, err
		}
	}
	dst = slices.Grow(dst, n)
	for j := range n {
		dst = append(dst, Event{
			Rank: rank[j], Kind: kinds[kindIx[j]], Name: names[nameIx[j]], Start: start[j], Dur: dur[j], Bytes: bytes[j],
			Peer: peer[j], Seq: seq[j], Step: step[j], Algo: algos[algoIx[j]], DType: dtypes[dtypeIx[j]], Root: root[j],
			Chunk: chunk[j], Comm: comms[commIx[j]], Wait: wait[j], Value: value[j],
		})
	}
	return dst, nil
}

// eosReader counts the bytes read and remembers the last eight, to tell a
// stream that ended with the end-of-stream marker from one that was cut.
type eosReader struct {
	r    io.Reader
	n    int64
	tail [8]byte
}

func (e *eosReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if n >= 8 {
		copy(e.tail[:], p[n-8:n])
	} else if n > 0 {
		copy(e.tail[:], e.tail[n:])
		copy(e.tail[8-n:], p[:n])
	}
	e.n += int64(n)
	return n, err
}

func (e *eosReader) sawEOS() bool {
	return e.n >= 8 && e.tail == [8]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}
}

// limitAlloc refuses allocations above a limit, which only a corrupt
// length asks for; the decoder's panic is turned into an error.
type limitAlloc struct {
	memory.Allocator
	limit int64
}

func (a *limitAlloc) Allocate(size int) []byte {
	if int64(size) > a.limit {
		panic(fmt.Sprintf("a buffer of %d bytes is larger than the stream", size))
	}
	return a.Allocator.Allocate(size)
}

func (a *limitAlloc) Reallocate(size int, b []byte) []byte {
	if int64(size) > a.limit {
		panic(fmt.Sprintf("a buffer of %d bytes is larger than the stream", size))
	}
	return a.Allocator.Reallocate(size, b)
}
