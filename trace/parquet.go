package trace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/apache/arrow/go/v15/parquet"
	"github.com/apache/arrow/go/v15/parquet/compress"
	"github.com/apache/arrow/go/v15/parquet/pqarrow"
)

// Columns of the Parquet export besides the trace's own (docs/export.md):
// the host the rank ran on, the run's world size and its id, the same on
// every row of a file (Parquet stores such a column in a few bytes), so
// that a query can group by host, knows the world a collective ran on,
// and exports of several runs can be queried as one table.
const (
	ColHost      = "host"
	ColWorldSize = "world_size"
	ColRunID     = "run_id"
)

// ParquetRowGroupRows is the default bound on a Parquet row group's rows:
// what the writer holds in memory (encoded and compressed) before it
// writes the group out, and the unit engines read in parallel.
const ParquetRowGroupRows = 1 << 18

// parquetChunk is how many rows are gathered into one Arrow record before
// it is handed to the Parquet writer: trace batches can be a few events.
const parquetChunk = 64 << 10

// ParquetOptions configure WriteParquet.
type ParquetOptions struct {
	// RowGroupRows bounds each row group; 0 means ParquetRowGroupRows.
	RowGroupRows int
	// Alloc is the allocator of the Arrow records the events are
	// gathered in; nil means memory.DefaultAllocator. The Parquet
	// writer's own buffers come from Go's allocator: Arrow's writer (v15)
	// does not release every encoder buffer it takes, and the garbage
	// collector reclaims them only if they are Go memory.
	Alloc memory.Allocator
}

// ParquetColumns returns the columns of an exported Parquet file, in
// order: every column of the v1 schema but rank, which the file's Hive
// partition (rank=N) holds, then host, world_size and run_id.
func ParquetColumns() []string {
	var out []string
	for _, f := range parquetFields {
		out = append(out, f.Name)
	}
	return out
}

// parquetFields are the Parquet export's columns: the trace's, with its
// dictionary strings as plain strings (Parquet dictionary-encodes them
// itself), without rank.
var parquetFields = func() []arrow.Field {
	var out []arrow.Field
	for _, f := range fields {
		if f.Name == ColRank {
			continue
		}
		if _, ok := f.Type.(*arrow.DictionaryType); ok {
			f.Type = arrow.BinaryTypes.String
		}
		out = append(out, f)
	}
	return append(out, arrow.Field{Name: ColHost, Type: arrow.BinaryTypes.String},
		arrow.Field{Name: ColWorldSize, Type: arrow.PrimitiveTypes.Int32},
		arrow.Field{Name: ColRunID, Type: arrow.BinaryTypes.String})
}()

// WriteParquet writes stream i of the run to w as one Parquet file: every
// event, in the stream's order, with start_ns on the aligned clock as
// ScanStream gives it, in row groups of at most opt.RowGroupRows rows, so
// that memory is bounded by a row group whatever the stream's length. The
// file's key-value metadata holds the rank, world size, host, run id and
// format version under the trace's metadata keys. The world size is the
// run's (RunFiles.WorldSize), as the analyses count it.
//
// It returns the rows written and the stream's facts. A cut stream is
// written whole up to the cut, a valid file, and the error then wraps a
// *TruncatedError (errors.Is(err, ErrTruncated)); a stream cut before its
// schema writes nothing and says so the same way. Any other error leaves
// w holding an incomplete file. It stops with ctx's error once ctx is
// done.
func (r *RunFiles) WriteParquet(ctx context.Context, i int, w io.Writer, opt ParquetOptions) (rows int64, info RankInfo, err error) {
	if opt.RowGroupRows <= 0 {
		opt.RowGroupRows = ParquetRowGroupRows
	}
	if opt.Alloc == nil {
		opt.Alloc = memory.DefaultAllocator
	}
	pw := &parquetWriter{alloc: opt.Alloc}
	defer pw.release()
	err = r.scanStream(i, nil, func(in RankInfo) error {
		info = in
		return pw.open(w, in, r.runID(in), r.WorldSize(), opt.RowGroupRows)
	}, func(_ RankInfo, b *Batch) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return pw.add(b)
	})
	if pw.fw == nil {
		return 0, info, err
	}
	if err != nil && !errors.Is(err, ErrTruncated) {
		return pw.rows, info, err
	}
	if ferr := pw.flush(); ferr != nil {
		return pw.rows, info, fmt.Errorf("writing rank %d as Parquet: %w", info.Rank, ferr)
	}
	if cerr := pw.close(); cerr != nil {
		return pw.rows, info, fmt.Errorf("writing rank %d as Parquet: %w", info.Rank, cerr)
	}
	return pw.rows, info, err
}

// runID is the run's id: the manifest's, else the stream's.
func (r *RunFiles) runID(info RankInfo) string {
	if r.Manifest != nil && r.Manifest.RunID != "" {
		return r.Manifest.RunID
	}
	return info.RunID
}

// parquetWriter turns trace batches into Arrow records of at most
// parquetChunk rows and writes them into buffered row groups.
type parquetWriter struct {
	alloc       memory.Allocator
	fw          *pqarrow.FileWriter
	rb          *array.RecordBuilder
	host, runID string
	world       int32
	rows        int64
	pending     int
	closed      bool
}

func (p *parquetWriter) open(w io.Writer, info RankInfo, runID string, world, rowGroup int) error {
	md := arrow.NewMetadata(
		[]string{MetaVersion, MetaRank, MetaWorldSize, MetaHost, MetaRunID},
		[]string{strconv.Itoa(FormatVersion), strconv.Itoa(info.Rank), strconv.Itoa(world), info.Host, runID})
	s := arrow.NewSchema(parquetFields, &md)
	props := parquet.NewWriterProperties(
		parquet.WithAllocator(memory.NewGoAllocator()),
		parquet.WithCompression(compress.Codecs.Zstd),
		parquet.WithMaxRowGroupLength(int64(rowGroup)),
		parquet.WithCreatedBy("commprof"),
		// Arrow Go marks the schema's root REPEATED by default, which the
		// format does not allow and some engines read as a list (Impala,
		// Snowflake); pyarrow, parquet-java and arrow-rs write REQUIRED.
		parquet.WithRootRepetition(parquet.Repetitions.Required),
		// Times and values rarely repeat: a dictionary would be built and
		// thrown away for every page.
		parquet.WithDictionaryFor(ColStart, false),
		parquet.WithDictionaryFor(ColDur, false),
		parquet.WithDictionaryFor(ColWait, false),
		parquet.WithDictionaryFor(ColValue, false),
	)
	fw, err := pqarrow.NewFileWriter(s, w, props, pqarrow.NewArrowWriterProperties(pqarrow.WithAllocator(memory.NewGoAllocator())))
	if err != nil {
		return fmt.Errorf("starting the Parquet file of rank %d: %w", info.Rank, err)
	}
	p.fw, p.host, p.runID, p.world = fw, info.Host, runID, int32(world)
	p.rb = array.NewRecordBuilder(p.alloc, s)
	return nil
}

// add appends a batch's rows, writing out a record each parquetChunk rows.
func (p *parquetWriter) add(b *Batch) error {
	for lo := 0; lo < b.Len; {
		hi := min(b.Len, lo+parquetChunk-p.pending)
		p.append(b, lo, hi)
		p.pending += hi - lo
		lo = hi
		if p.pending >= parquetChunk {
			if err := p.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// append adds rows [lo, hi) of b to the record builder, column by
// column in parquetFields' order.
func (p *parquetWriter) append(b *Batch, lo, hi int) {
	n := hi - lo
	str := func(col int, idx []int32, dict []string) {
		sb := p.rb.Field(col).(*array.StringBuilder)
		sb.Reserve(n)
		if idx == nil { // an optional column the stream lacks
			for range n {
				sb.Append("")
			}
			return
		}
		for _, k := range idx[lo:hi] {
			sb.Append(dict[k])
		}
	}
	i64 := func(col int, v []int64) { p.rb.Field(col).(*array.Int64Builder).AppendValues(v[lo:hi], nil) }
	i32 := func(col int, v []int32) { p.rb.Field(col).(*array.Int32Builder).AppendValues(v[lo:hi], nil) }
	kb := p.rb.Field(0).(*array.StringBuilder)
	kb.Reserve(n)
	for _, k := range b.Kind[lo:hi] {
		kb.Append(k.String())
	}
	str(1, b.Name, b.Names)
	i64(2, b.Start)
	i64(3, b.Dur)
	i64(4, b.Bytes)
	i32(5, b.Peer)
	i64(6, b.Seq)
	i32(7, b.Step)
	str(8, b.Algo, b.Algos)
	str(9, b.DType, b.DTypes)
	i32(10, b.Root)
	i32(11, b.Chunk)
	str(12, b.Comm, b.Comms)
	i64(13, b.Wait)
	p.rb.Field(14).(*array.Float64Builder).AppendValues(b.Value[lo:hi], nil)
	str(15, b.Label, b.Labels)
	for col, v := range map[int]string{16: p.host, 18: p.runID} {
		sb := p.rb.Field(col).(*array.StringBuilder)
		sb.Reserve(n)
		for range n {
			sb.Append(v)
		}
	}
	wb := p.rb.Field(17).(*array.Int32Builder)
	wb.Reserve(n)
	for range n {
		wb.UnsafeAppend(p.world)
	}
}

// flush writes the rows gathered so far into the current row group,
// which the writer closes and starts anew every RowGroupRows rows.
func (p *parquetWriter) flush() error {
	if p.pending == 0 {
		return nil
	}
	rec := p.rb.NewRecord()
	defer rec.Release()
	p.rows += int64(p.pending)
	p.pending = 0
	return p.fw.WriteBuffered(rec)
}

func (p *parquetWriter) close() error {
	p.closed = true
	return p.fw.Close()
}

// release frees the builder and, on a failed write, the writer's buffers.
func (p *parquetWriter) release() {
	if p.fw != nil && !p.closed {
		p.closed = true
		_ = p.fw.Close() // the file is being abandoned: only its buffers matter
	}
	if p.rb != nil {
		p.rb.Release()
	}
}
