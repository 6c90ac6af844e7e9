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
