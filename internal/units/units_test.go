package units

import (
	"encoding/json"
	"math"
	"os"
	"testing"
)

// Case is one formatting case of testdata/format.json: a function, its
// arguments and what it prints. report's tests run format.js, the pages'
// formatters, over the same file, so that Go and the pages print every
// figure alike.
type formatCase struct {
	Fn   string    `json:"fn"`
	Args []float64 `json:"args"`
	Want string    `json:"want"`
}

func TestFormatCases(t *testing.T) {
	b, err := os.ReadFile("testdata/format.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []formatCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	fns := map[string]func(a []float64) string{
		"duration": func(a []float64) string { return Duration(a[0]) },
		"bytes":    func(a []float64) string { return Bytes(int64(a[0])) },
		"gbps":     func(a []float64) string { return GBps(a[0]) },
		"percent":  func(a []float64) string { return Percent(a[0], int(a[1])) },
		"int":      func(a []float64) string { return Int(a[0]) },
	}
	seen := map[string]int{}
	for _, c := range cases {
		f, ok := fns[c.Fn]
		if !ok {
			t.Errorf("case of %q: no such formatter", c.Fn)
			continue
		}
		seen[c.Fn]++
		if got := f(c.Args); got != c.Want {
			t.Errorf("%s%v = %q, want %q", c.Fn, c.Args, got, c.Want)
		}
	}
	for fn := range fns {
		if seen[fn] < 5 {
			t.Errorf("%d cases of %s", seen[fn], fn)
		}
	}
}

// Values JSON cannot hold exactly, and the int64 extremes.
func TestBytesExtremes(t *testing.T) {
	for in, want := range map[int64]string{math.MaxInt64: "8 EiB", math.MinInt64: "-8 EiB", 1<<20 + 1: "1 MiB"} {
		if got := Bytes(in); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestBucket(t *testing.T) {
	for _, tc := range []struct {
		k    int
		want string
	}{
		{-1, "0B"}, {0, "0B"}, {1, "1B-2B"}, {10, "512B-1KiB"}, {11, "1KiB-2KiB"}, {17, "64KiB-128KiB"},
		{21, "1MiB-2MiB"}, {32, "2GiB-4GiB"}, {63, "4EiB-8EiB"}, {64, "8EiB-16EiB"},
	} {
		if got := Bucket(tc.k); got != tc.want {
			t.Errorf("Bucket(%d) = %q, want %q", tc.k, got, tc.want)
		}
	}
}
