package trace

import "io"

// Batch is one record batch as columns, for readers that go through
// millions of events and do not want an Event struct each: string columns
// are indices into their dictionaries (Names[b.Name[i]]). A Batch's slices
// are valid until the next NextBatch call and must not be changed: the
// numeric ones point into the batch as read, which the reader may reuse
// for the next batch. Columns the reader was not asked for are nil.
type Batch struct {
	Len                           int
	Rank, Peer, Step, Root, Chunk []int32
	Kind                          []Kind
	Name, Algo, DType, Comm       []int32 // indices into Names, Algos, DTypes, Comms
	Start, Dur, Bytes, Seq, Wait  []int64
	Value                         []float64
	Names, Algos, DTypes, Comms   []string
	// Label indexes Labels. A stream without the label column reads as
	// all zeros into Labels = [""].
	Label  []int32
	Labels []string
}

// Event returns row i as an Event. A batch without labels (Label nil)
// gives Label "".
func (b *Batch) Event(i int) Event {
	e := Event{Rank: b.Rank[i], Kind: b.Kind[i], Name: b.Names[b.Name[i]], Start: b.Start[i], Dur: b.Dur[i],
		Bytes: b.Bytes[i], Peer: b.Peer[i], Seq: b.Seq[i], Step: b.Step[i], Algo: b.Algos[b.Algo[i]],
		DType: b.DTypes[b.DType[i]], Root: b.Root[i], Chunk: b.Chunk[i], Comm: b.Comms[b.Comm[i]], Wait: b.Wait[i], Value: b.Value[i]}
	if b.Label != nil {
		e.Label = b.Labels[b.Label[i]]
	}
	return e
}

// BatchOf lays events out as a Batch, the inverse of Event: every column
// filled, each string column with a dictionary of its own. It feeds
// events held in memory to what reads batches (an analysis's tests).
func BatchOf(evs []Event) *Batch {
	n := len(evs)
	b := &Batch{Len: n,
		Rank: make([]int32, n), Peer: make([]int32, n), Step: make([]int32, n), Root: make([]int32, n), Chunk: make([]int32, n),
		Kind: make([]Kind, n), Name: make([]int32, n), Algo: make([]int32, n), DType: make([]int32, n), Comm: make([]int32, n),
		Start: make([]int64, n), Dur: make([]int64, n), Bytes: make([]int64, n), Seq: make([]int64, n), Wait: make([]int64, n),
		Value: make([]float64, n), Label: make([]int32, n)}
	dicts := [5]map[string]int32{{}, {}, {}, {}, {}}
	lists := [5]*[]string{&b.Names, &b.Algos, &b.DTypes, &b.Comms, &b.Labels}
	id := func(d int, s string) int32 {
		if i, ok := dicts[d][s]; ok {
			return i
		}
		i := int32(len(*lists[d]))
		dicts[d][s] = i
		*lists[d] = append(*lists[d], s)
		return i
	}
	for i := range evs {
		e := &evs[i]
		b.Rank[i], b.Peer[i], b.Step[i], b.Root[i], b.Chunk[i] = e.Rank, e.Peer, e.Step, e.Root, e.Chunk
		b.Kind[i] = e.Kind
		b.Name[i], b.Algo[i], b.DType[i], b.Comm[i], b.Label[i] = id(0, e.Name), id(1, e.Algo), id(2, e.DType), id(3, e.Comm), id(4, e.Label)
		b.Start[i], b.Dur[i], b.Bytes[i], b.Seq[i], b.Wait[i], b.Value[i] = e.Start, e.Dur, e.Bytes, e.Seq, e.Wait, e.Value
	}
	return b
}

// NextBatchWhere is NextBatch, passing over the batches that pass names
// by their place among the stream's record batches (0 for the first), not
// decoding them, and those for which keep says no: keep is given each
// batch with only its start and dur columns decoded (the others nil), and
// the batches it keeps are decoded to the Reader's columns. Either may be
// nil. A filter over time (a timeline's window) so reads a long stream at
// the cost of two columns, or, where the batches' times are known, of
// none.
func (r *Reader) NextBatchWhere(b *Batch, pass func(k int) bool, keep func(*Batch) bool) error {
	if r.done {
		return io.EOF
	}
	err := r.readWhere(b, &r.need, pass, keep)
	if err != nil {
		r.done = true
	}
	return err
}

// NextBatch reads the next batch into b, decoding the columns the
// Reader's options name. It returns io.EOF after the last batch of a
// complete stream and a *TruncatedError if the stream was cut; Next and
// NextBatch may be mixed.
func (r *Reader) NextBatch(b *Batch) error {
	if r.done {
		return io.EOF
	}
	err := r.read(b, &r.need)
	if err != nil {
		r.done = true
	}
	return err
}
