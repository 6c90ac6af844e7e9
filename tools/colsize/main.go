// Command colsize prints what each column of a rank's trace stream takes
// compressed on its own at zstd's best level, in bytes an event, and the
// time columns again as differences from the event before: where a
// stream's bytes go (docs/benchmarks.md, "Recording: cost and trace
// size").
//
//	go run ./tools/colsize RUN/rank-00000.arrows
package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
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
		for _, k := range b.Kind {
			narrow["kind"] = append(narrow["kind"], int32(k))
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
