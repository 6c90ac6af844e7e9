package trace

import (
	"fmt"
	"io"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
)

// Batch is one record batch as columns, for readers that go through
// millions of events and do not want an Event struct each: string columns
// are indices into their dictionaries (Names[b.Name[i]]). A Batch's slices
// are reused by the next NextBatch call: the numeric ones point into the
// batch as read, so they may be changed in place (ScanStream aligns Start
// that way) but must not be kept.
type Batch struct {
	Len                           int
	Rank, Peer, Step, Root, Chunk []int32
	Kind                          []Kind
	Name, Algo, DType, Comm       []int32 // indices into Names, Algos, DTypes, Comms
	Start, Dur, Bytes, Seq, Wait  []int64
	Value                         []float64
	Names, Algos, DTypes, Comms   []string
}

// Event returns row i as an Event.
func (b *Batch) Event(i int) Event {
	return Event{Rank: b.Rank[i], Kind: b.Kind[i], Name: b.Names[b.Name[i]], Start: b.Start[i], Dur: b.Dur[i],
		Bytes: b.Bytes[i], Peer: b.Peer[i], Seq: b.Seq[i], Step: b.Step[i], Algo: b.Algos[b.Algo[i]],
		DType: b.DTypes[b.DType[i]], Root: b.Root[i], Chunk: b.Chunk[i], Comm: b.Comms[b.Comm[i]], Wait: b.Wait[i], Value: b.Value[i]}
}

// NextBatch reads the next batch into b. It returns io.EOF after the last
// batch of a complete stream and a *TruncatedError if the stream was cut;
// Next and NextBatch may be mixed.
func (r *Reader) NextBatch(b *Batch) (err error) {
	if r.done {
		return io.EOF
	}
	defer func() {
		if p := recover(); p != nil {
			err = r.cut(fmt.Errorf("corrupt batch: %v", p))
		}
		if err != nil {
			r.done = true
		}
	}()
	if !r.r.Next() {
		if err := r.r.Err(); err != nil {
			return r.cut(err)
		}
		if !r.guard.eos {
			return r.cut(nil)
		}
		return io.EOF
	}
	if err := fill(r.r.Record(), &r.cols, b); err != nil {
		return r.cut(err)
	}
	r.batches++
	r.events += int64(b.Len)
	return nil
}

func fill(rec arrow.Record, cols *[numCols]int, b *Batch) error {
	n := int(rec.NumRows())
	if err := checkRows(rec, cols, n); err != nil {
		return err
	}
	b.Len = n
	var err error
	col := func(i int) arrow.Array { return rec.Column(cols[i]) }
	bad := func(i int) {
		if err == nil {
			err = fmt.Errorf("column %s is %T of %d rows in a batch of %d", fields[i].Name, col(i), col(i).Len(), n)
		}
	}
	// Numeric columns are not copied: the Batch's slices point into the
	// record's buffers, which stay valid until the next batch is read (the
	// lifetime the Batch promises).
	i32 := func(i int, dst []int32) []int32 {
		if a, ok := col(i).(*array.Int32); ok && a.Len() == n && a.NullN() == 0 {
			return a.Int32Values()
		}
		bad(i)
		return grow(dst, n)
	}
	i64 := func(i int, dst []int64) []int64 {
		if a, ok := col(i).(*array.Int64); ok && a.Len() == n && a.NullN() == 0 {
			return a.Int64Values()
		}
		bad(i)
		return grow(dst, n)
	}
	dict := func(i int, dst []int32, strs []string) ([]int32, []string) {
		dst = grow(dst, n)
		strs = strs[:0]
		d, ok := col(i).(*array.Dictionary)
		if !ok || d.Len() != n || d.NullN() != 0 {
			bad(i)
			return dst, append(strs, "")
		}
		vals, ok := d.Dictionary().(*array.String)
		if !ok || vals.Len() == 0 {
			bad(i)
			return dst, append(strs, "")
		}
		for j := range vals.Len() {
			strs = append(strs, vals.Value(j))
		}
		switch ix := d.Indices().(type) {
		case *array.Int8:
			for j, k := range ix.Int8Values() {
				dst[j] = int32(k)
			}
		case *array.Int32:
			copy(dst, ix.Int32Values())
		default:
			bad(i)
		}
		for _, k := range dst {
			if k < 0 || int(k) >= len(strs) {
				if err == nil {
					err = fmt.Errorf("column %s: dictionary index %d out of %d values", fields[i].Name, k, len(strs))
				}
				clear(dst)
				break
			}
		}
		return dst, strs
	}
	b.Rank = i32(0, b.Rank)
	var kindIx []int32
	var kindStr []string
	kindIx, kindStr = dict(1, nil, nil)
	b.Name, b.Names = dict(2, b.Name, b.Names)
	b.Start, b.Dur, b.Bytes = i64(3, b.Start), i64(4, b.Dur), i64(5, b.Bytes)
	b.Peer, b.Seq, b.Step = i32(6, b.Peer), i64(7, b.Seq), i32(8, b.Step)
	b.Algo, b.Algos = dict(9, b.Algo, b.Algos)
	b.DType, b.DTypes = dict(10, b.DType, b.DTypes)
	b.Root, b.Chunk = i32(11, b.Root), i32(12, b.Chunk)
	b.Comm, b.Comms = dict(13, b.Comm, b.Comms)
	b.Wait = i64(14, b.Wait)
	if a, ok := col(15).(*array.Float64); ok && a.Len() == n {
		b.Value = a.Float64Values()
	} else {
		b.Value = grow(b.Value, n)
		bad(15)
	}
	if err != nil {
		return err
	}
	kinds := make([]Kind, len(kindStr))
	for j, k := range kindStr {
		if kinds[j], err = ParseKind(k); err != nil {
			return err
		}
	}
	b.Kind = grow(b.Kind, n)
	for j, k := range kindIx {
		b.Kind[j] = kinds[k]
	}
	return nil
}

// checkRows makes sure the batch's row count is backed by data before
// anything is allocated by it: a corrupt count could ask for terabytes.
func checkRows(rec arrow.Record, cols *[numCols]int, n int) error {
	a, ok := rec.Column(cols[0]).(*array.Int32)
	if !ok || n < 0 || a.Len() != n {
		return fmt.Errorf("a batch of %d rows whose rank column does not match", n)
	}
	if bufs := a.Data().Buffers(); len(bufs) < 2 || bufs[1] == nil || bufs[1].Len() < 4*n {
		return fmt.Errorf("a batch of %d rows with a shorter rank column", n)
	}
	return nil
}
