package units

import (
	"math"
	"testing"
)

func TestBytes(t *testing.T) {
	for _, tc := range []struct {
		in   int64
		want string
	}{
		{0, "0B"}, {1, "1B"}, {1023, "1023B"}, {1024, "1KiB"}, {1536, "1.5KiB"},
		{64 << 10, "64KiB"}, {1<<20 + 1<<19, "1.5MiB"}, {1<<20 + 1, "1.0MiB"},
		{5 << 30, "5GiB"}, {3 << 40, "3TiB"}, {7 << 50, "7PiB"}, {1 << 62, "4EiB"},
		{math.MaxInt64, "8EiB"}, {-2048, "-2KiB"}, {-5, "-5B"}, {math.MinInt64, "-8EiB"},
	} {
		if got := Bytes(tc.in); got != tc.want {
			t.Errorf("Bytes(%d) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestDuration(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{0, "0ns"}, {850, "850ns"}, {999.4, "999ns"}, {999.6, "1µs"}, {1000, "1µs"},
		{12_345, "12.3µs"}, {999_400, "999µs"}, {999_600, "1ms"}, {4_560_000, "4.56ms"},
		{10e6, "10ms"}, {2.1e9, "2.1s"}, {999.4e9, "999s"}, {999.6e9, "1000s"}, {1234.4e9, "1234s"},
		{-12_345, "-12.3µs"}, {-850, "-850ns"},
	} {
		if got := Duration(tc.in); got != tc.want {
			t.Errorf("Duration(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestGBps(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{{0.1, "0.10 GB/s"}, {12.345, "12.35 GB/s"}, {0, "0.00 GB/s"}} {
		if got := GBps(tc.in); got != tc.want {
			t.Errorf("GBps(%v) = %q, want %q", tc.in, got, tc.want)
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
	// Each end reads as Bytes prints the size.
	for k := 1; k < 63; k++ {
		if want := Bytes(1<<(k-1)) + "-" + Bytes(1<<k); Bucket(k) != want {
			t.Errorf("Bucket(%d) = %q, Bytes gives %q", k, Bucket(k), want)
		}
	}
}
