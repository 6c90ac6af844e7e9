package trace

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func TestInFlightRoundTrip(t *testing.T) {
	f := &InFlight{Rank: 3, World: 8, PID: 4242, Host: "node7", State: InFlightBlocked, Kind: InFlightCollective,
		Completed: 17, Op: "allreduce", Comm: "world/split0:1", CommSize: 4, Members: []int{1, 3, 5, 1023},
		Seq: 5, Bytes: 8192, DType: "float64", RedOp: "sum", Root: -1, Peer: -1, EntryNS: 123, ExitNS: 99,
		Entry: time.Unix(0, 1700000000123456789), Exit: time.Unix(0, 1700000000000000001), Code: 0, Error: 15}
	for i := range 11 { // more than the file keeps: the last 8 remain
		f.Recent = append(f.Recent, InFlightCall{Op: "broadcast", Comm: "world", DType: "byte", RedOp: "max", Seq: int64(i), Bytes: 1 << i, Root: i % 4, Error: i % 2})
	}
	b := make([]byte, InFlightSize)
	EncodeInFlight(b, f, 6)
	got, err := DecodeInFlight(b)
	if err != nil {
		t.Fatal(err)
	}
	want := *f
	want.Recent = f.Recent[3:]
	if !reflect.DeepEqual(got, &want) {
		t.Errorf("decoded\n%+v\nwant\n%+v", got, &want)
	}

	// A rank writing it (the counter is odd) is told apart.
	EncodeInFlight(b, f, 7)
	if _, err := DecodeInFlight(b); !errors.Is(err, ErrInFlightTorn) {
		t.Errorf("odd counter: %v, want ErrInFlightTorn", err)
	}
	// Members past the file's bitmap are unknown, not wrong.
	f.Members = []int{0, 2000}
	EncodeInFlight(b, f, 8)
	if got, _ := DecodeInFlight(b); got.Members != nil {
		t.Errorf("members %v, want unknown", got.Members)
	}
	for _, bad := range [][]byte{nil, make([]byte, InFlightSize), []byte("CPINFL01")} {
		if _, err := DecodeInFlight(bad); err == nil {
			t.Errorf("%d bytes decoded without error", len(bad))
		}
	}
}

func TestReadInFlightDir(t *testing.T) {
	dir := t.TempDir()
	if fl, ps := ReadInFlightDir(dir); fl != nil || ps != nil {
		t.Fatalf("a run without in-flight files: %v, %v", fl, ps)
	}
	b := make([]byte, InFlightSize)
	for _, r := range []int{2, 0} {
		EncodeInFlight(b, &InFlight{Rank: r, World: 3, Seq: -1}, 2)
		if err := os.MkdirAll(filepath.Dir(InFlightFile(dir, r)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(InFlightFile(dir, r), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(InFlightFile(dir, 1), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	fl, ps := ReadInFlightDir(dir)
	if len(fl) != 2 || fl[0].Rank != 0 || fl[1].Rank != 2 || len(ps) != 1 {
		t.Errorf("read %d files (%v), problems %v; want ranks 0 and 2, one problem", len(fl), fl, ps)
	}
}
