// Command colsize prints what each column of a rank's trace stream takes
// compressed on its own at zstd's best level, in bytes an event, and the
// time columns again as differences from the event before: where a
// stream's bytes go (docs/benchmarks.md, "Recording: cost and trace
// size"). It then prices the two time columns under an adaptive model of
// the kind an entropy coder would use, as a check on how far any lossless
// encoding of them could go.
//
//	go run ./tools/colsize RUN/rank-00000.arrows
package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"

	"github.com/klauspost/compress/zstd"

	"github.com/commprof/commprof/trace"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: colsize STREAM")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "colsize:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	rd, err := trace.NewReader(f, trace.ReaderOptions{})
	if err != nil {
		return err
	}
	defer rd.Release()
	wide := map[string][]int64{}
	narrow := map[string][]int32{}
	var keys []durKey
	n := 0
	var b trace.Batch
	for {
		err := rd.NextBatch(&b)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		n += b.Len
		for name, col := range map[string][]int64{"start_ns": b.Start, "dur_ns": b.Dur, "bytes": b.Bytes, "seq": b.Seq, "wait_ns": b.Wait} {
			wide[name] = append(wide[name], col...)
		}
		for _, v := range b.Value {
			wide["value"] = append(wide["value"], int64(math.Float64bits(v)))
		}
		for name, col := range map[string][]int32{"rank": b.Rank, "peer": b.Peer, "step": b.Step, "root": b.Root, "chunk": b.Chunk,
			"name": b.Name, "algo": b.Algo, "dtype": b.DType, "comm": b.Comm, "label": b.Label} {
			narrow[name] = append(narrow[name], col...)
		}
		for i, k := range b.Kind {
			narrow["kind"] = append(narrow["kind"], int32(k))
			keys = append(keys, durKey{k, b.Names[b.Name[i]], b.Bytes[i], b.Peer[i]})
		}
	}
	if n == 0 {
		return fmt.Errorf("%s holds no events", path)
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	if err != nil {
		return err
	}
	per := func(bs []byte) float64 { return float64(len(enc.EncodeAll(bs, nil))) / float64(n) }
	total := 0.0
	for _, name := range []string{"start_ns", "dur_ns", "wait_ns", "bytes", "seq", "value"} {
		v := per(le64(wide[name]))
		total += v
		fmt.Printf("%-9s %6.2f B/event", name, v)
		if name == "start_ns" || name == "dur_ns" {
			fmt.Printf("   as differences %6.2f", per(le64(diffs(wide[name]))))
		}
		fmt.Println()
	}
	for _, name := range []string{"kind", "name", "peer", "step", "algo", "dtype", "root", "chunk", "comm", "label", "rank"} {
		v := per(le32(narrow[name]))
		total += v
		fmt.Printf("%-9s %6.2f B/event\n", name, v)
	}
	fmt.Printf("modelled: start_ns %.2f B/event, dur_ns %.2f\n", modelStarts(wide["start_ns"], wide["dur_ns"], narrow["kind"])/float64(n),
		modelDurs(wide["dur_ns"], keys)/float64(n))
	st, err := f.Stat()
	if err != nil {
		return err
	}
	fmt.Printf("%d events: the columns %.2f B/event, the file %.2f\n", n, total, float64(st.Size())/float64(n))
	return nil
}

func le64(v []int64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return b
}

func le32(v []int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

// diffs is each value less the one before it (the first less 0).
func diffs(v []int64) []int64 {
	out := make([]int64, len(v))
	var prev int64
	for i, x := range v {
		out[i], prev = x-prev, x
	}
	return out
}

// The model: a value is coded as its class, its sign and bit length, with
// adaptive counts kept apart by a context, followed by its bits below the
// leading one as they are. A coder that does this costs the sum below to
// within a few bytes; it is the best of the simple predictors tried
// (docs/benchmarks.md, "Why the default run stays above 5 B/event").
type classes struct {
	counts map[int]*[130]float64
}

// bits is the cost of coding v in context ctx, and counts it.
func (c *classes) bits(ctx int, v int64) float64 {
	if c.counts == nil {
		c.counts = map[int]*[130]float64{}
	}
	cnt := c.counts[ctx]
	if cnt == nil {
		cnt = new([130]float64)
		c.counts[ctx] = cnt
	}
	u, class := uint64(v), 0
	if v < 0 {
		u, class = uint64(-v), 65
	}
	l := bits.Len64(u)
	class += l
	total := 0.0
	for _, x := range cnt {
		total += x
	}
	cost := -math.Log2((cnt[class] + 0.5) / (total + 0.5*float64(len(cnt))))
	cnt[class]++
	if l > 1 {
		cost += float64(l - 1)
	}
	return cost
}

// modelStarts prices each start as its distance from the end of the event
// before, in the context of the two events' kinds, in bytes.
func modelStarts(start, dur []int64, kind []int32) float64 {
	var c classes
	sum, end, prev := 0.0, int64(0), int32(-1)
	for i, s := range start {
		sum += c.bits(int(prev)<<8|int(kind[i]), s-end)
		end, prev = s+dur[i], kind[i]
	}
	return sum / 8
}

// durKey is what an event's duration is predicted from: the last one of
// the same kind, name, size and peer.
type durKey struct {
	kind  trace.Kind
	name  string
	bytes int64
	peer  int32
}

// modelDurs prices each duration in the context of its kind, as itself and
// as its difference from the last like it, whichever costs less over the
// stream, in bytes.
func modelDurs(dur []int64, keys []durKey) float64 {
	var plain, diff classes
	a, b := 0.0, 0.0
	last := map[durKey]int64{}
	for i, d := range dur {
		k := keys[i]
		a += plain.bits(int(k.kind), d)
		p, ok := last[k]
		if ok {
			b += diff.bits(int(k.kind)+256, d-p)
		} else {
			b += diff.bits(int(k.kind), d)
		}
		last[k] = d
	}
	return min(a, b) / 8
}
