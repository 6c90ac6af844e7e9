package trace

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/apache/arrow/go/v15/arrow"
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

// TruncatedError says where a stream was cut, or where it turned corrupt:
// either way every complete batch before that point was read.
type TruncatedError struct {
	Batches int   // complete batches read
	Events  int64 // events in them
	Bytes   int64 // bytes of the stream read
	Err     error // what the cut looked like
}

func (e *TruncatedError) Error() string {
	// A stream that simply ends early was cut (its rank was killed);
	// anything else wrong past the last good batch is corruption.
	if e.Err == nil || errors.Is(e.Err, io.ErrUnexpectedEOF) {
		s := fmt.Sprintf("trace stream was cut after %d complete batches (%d events, %d bytes read): the rank stopped without closing its trace", e.Batches, e.Events, e.Bytes)
		if e.Err != nil {
			s += ": " + e.Err.Error()
		}
		return s
	}
	return fmt.Sprintf("trace stream is corrupt after %d complete batches (%d events, %d bytes read; the events before are kept): %v", e.Batches, e.Events, e.Bytes, e.Err)
}

func (e *TruncatedError) Is(target error) bool { return target == ErrTruncated }
func (e *TruncatedError) Unwrap() error        { return e.Err }

// ReaderOptions configure a Reader.
type ReaderOptions struct {
	Alloc memory.Allocator // for reading the schema; default memory.DefaultAllocator
	// Limit bounds any single allocation the decoder makes, in bytes, so a
	// corrupt length cannot exhaust memory (default 1 GiB; ReadFile uses
	// the file's size). Decompressed buffers may be up to 64 times larger.
	Limit int64
	// Columns names the v1 columns NextBatch decodes (Col* constants); the
	// Batch's other columns are nil. Empty means all of them. Next and
	// ReadAll always decode every column.
	Columns []string
}

// Reader reads one rank's stream, one batch at a time. It is not safe for
// concurrent use; the caller must call Release.
type Reader struct {
	guard   *messageGuard
	dec     *decoder
	need    [numCols]bool
	info    RankInfo
	batch   Batch // Next's
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
	need, err := wanted(opt.Columns)
	if err != nil {
		return nil, err
	}
	guard := newMessageGuard(r, opt.Limit)
	defer func() {
		if p := recover(); p != nil {
			rd, err = nil, fmt.Errorf("%w: %v", ErrNotTrace, p)
		}
	}()
	// Arrow's reader parses the schema message; the batches that follow
	// are the decoder's.
	ir, err := ipc.NewReaderFromMessageReader(guard, ipc.WithAllocator(&limitAlloc{opt.Alloc, opt.Limit}))
	if err != nil {
		if guard.n == 0 || guard.short {
			// Its rank stopped before it had written its schema: a cut
			// stream with nothing in it, not a foreign file.
			return nil, &TruncatedError{Bytes: guard.n, Err: fmt.Errorf("it ends before its schema: %w", io.ErrUnexpectedEOF)}
		}
		return nil, fmt.Errorf("%w: %v", ErrNotTrace, err)
	}
	s := ir.Schema()
	ir.Release()
	cols, err := columns(s)
	if err != nil {
		return nil, err
	}
	info, err := infoFrom(s)
	if err != nil {
		return nil, err
	}
	dec, err := newDecoder(s, cols, guard.schema, min(opt.Limit*64, 4<<30))
	if err != nil {
		return nil, err
	}
	return &Reader{guard: guard, dec: dec, need: need, info: info}, nil
}

// wanted turns column names into the decoder's mask.
func wanted(names []string) ([numCols]bool, error) {
	var need [numCols]bool
	if len(names) == 0 {
		for i := range need {
			need[i] = true
		}
	}
	for _, n := range names {
		i := slices.IndexFunc(fields, func(f arrow.Field) bool { return f.Name == n })
		if i < 0 {
			return need, fmt.Errorf("trace: no column %q in the v1 schema", n)
		}
		need[i] = true
	}
	return need, nil
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

func (r *Reader) next(dst []Event) ([]Event, error) {
	b := &r.batch
	if err := r.read(b, &r.dec.all); err != nil {
		return dst, err
	}
	dst = slices.Grow(dst, b.Len)
	for i := range b.Len {
		dst = append(dst, b.Event(i))
	}
	return dst, nil
}

// read decodes the next record batch into b, applying the dictionary
// batches before it.
func (r *Reader) read(b *Batch, need *[numCols]bool) error { return r.readWhere(b, need, nil, nil) }

// timeCols are the columns a batch filter (NextBatchWhere) sees.
var timeCols = func() (c [numCols]bool) {
	c[3], c[4] = true, true // start_ns, dur_ns
	return c
}()

// readWhere is read, passing over the record batches that pass (if not
// nil) names by their place among the stream's batches, undecoded, and
// those for which keep (if not nil), given a batch of only its start and
// dur columns, says no: their other columns are not decoded.
func (r *Reader) readWhere(b *Batch, need *[numCols]bool, pass func(k int) bool, keep func(*Batch) bool) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = r.cut(fmt.Errorf("corrupt batch: %v", p))
		}
	}()
	for {
		kind, meta, body, err := r.guard.next()
		switch {
		case err == io.EOF && r.guard.eos:
			return io.EOF
		case err == io.EOF:
			return r.cut(nil)
		case err != nil:
			return r.cut(err)
		}
		switch kind {
		case msgDictionaryBatch:
			if err := r.dec.dictionary(meta, body); err != nil {
				return r.cut(err)
			}
		case msgRecordBatch:
			if pass != nil && pass(r.batches) {
				r.batches++
				continue
			}
			if keep != nil {
				if err := r.dec.batch(meta, body, b, &timeCols); err != nil {
					return r.cut(err)
				}
				if err := r.check(b); err != nil {
					return r.cut(err)
				}
				if !keep(b) {
					r.batches++
					r.events += int64(b.Len)
					continue
				}
			}
			if err := r.dec.batch(meta, body, b, need); err != nil {
				return r.cut(err)
			}
			if err := r.check(b); err != nil {
				return r.cut(err)
			}
			r.batches++
			r.events += int64(b.Len)
			return nil
		default:
			return r.cut(fmt.Errorf("%w: a message of type %d after the schema", errFraming, kind))
		}
	}
}

// maxTime bounds start_ns and dur_ns: about 146 years of ns, so that no
// sum of a start and a duration (or two starts' difference) overflows.
const maxTime = 1 << 62

// check validates the values of a decoded batch against what the stream
// can hold, before anything downstream sizes a table or a chart by them:
// the rank column is the stream's rank, peers are ranks of its world (or
// -1), durations and bytes are not negative, and times are in range.
func (r *Reader) check(b *Batch) error {
	bad := func(col string, i int, v any, want string) error {
		return fmt.Errorf("column %s, row %d of the batch: %v, want %s", col, i, v, want)
	}
	for i, v := range b.Rank[:min(len(b.Rank), b.Len)] {
		if int(v) != r.info.Rank {
			return bad(ColRank, i, v, fmt.Sprintf("the stream's rank, %d", r.info.Rank))
		}
	}
	for i, v := range b.Peer[:min(len(b.Peer), b.Len)] {
		if v < -1 || int(v) >= r.info.WorldSize {
			return bad(ColPeer, i, v, fmt.Sprintf("-1 or a rank below the world size %d", r.info.WorldSize))
		}
	}
	for i, v := range b.Dur[:min(len(b.Dur), b.Len)] {
		if v < 0 || v > maxTime {
			return bad(ColDur, i, v, "a duration from 0 to 2^62 ns")
		}
	}
	for i, v := range b.Start[:min(len(b.Start), b.Len)] {
		if v < -maxTime || v > maxTime {
			return bad(ColStart, i, v, "a time within ±2^62 ns")
		}
	}
	for i, v := range b.Bytes[:min(len(b.Bytes), b.Len)] {
		if v < 0 {
			return bad(ColBytes, i, v, "0 or more bytes")
		}
	}
	return nil
}

func (r *Reader) cut(err error) error {
	return &TruncatedError{Batches: r.batches, Events: r.events, Bytes: r.guard.n, Err: err}
}

// Release frees the reader's buffers.
func (r *Reader) Release() { r.dec.close() }

// ReadFile reads a whole rank stream from path. If the stream was cut it
// returns every complete batch's events together with a *TruncatedError.
func ReadFile(path string) (RankInfo, []Event, error) {
	f, st, err := openRegular(path)
	if err != nil {
		return RankInfo{}, nil, fmt.Errorf("opening trace: %w", err)
	}
	defer f.Close()
	r, err := NewReader(bufio.NewReaderSize(f, 1<<20), ReaderOptions{Limit: st.Size() + 1<<20})
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
