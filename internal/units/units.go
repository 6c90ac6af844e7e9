// Package units formats sizes, durations and rates for people. It is the
// one set of formatters behind commprof's findings, tables, pages and
// command output, so that a figure reads the same everywhere; the pages'
// scripts have their counterpart in report/assets/format.js.
//
// Sizes are in binary units (KiB = 1024 bytes), as buffer sizes are given;
// rates in decimal GB/s (GB = 1e9 bytes), as bus bandwidth is.
package units

import (
	"fmt"
	"math"
)

// Bytes prints a size in bytes with a power-of-two unit and no space: 512B,
// 64KiB, 1.5MiB (one decimal, none when whole). A negative size prints
// as its magnitude after a minus sign.
func Bytes(b int64) string {
	if b < 0 {
		if b == math.MinInt64 {
			return "-8EiB"
		}
		return "-" + Bytes(-b)
	}
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%dB", b)
	}
	v, i := float64(b), -1
	for v >= unit && i < 5 {
		v /= unit
		i++
	}
	u := [...]string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}[i]
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d%s", int64(v), u)
	}
	return fmt.Sprintf("%.1f%s", v, u)
}

// Bucket names the log2 size bucket k as tables show it: bucket k holds
// sizes from 2^(k-1) up to, not including, 2^k ("64KiB-128KiB"), and
// bucket 0 (or less) holds 0 bytes ("0B").
func Bucket(k int) string {
	if k <= 0 {
		return "0B"
	}
	return pow2(uint(k-1)) + "-" + pow2(uint(k))
}

// pow2 prints 2^e bytes as Bytes would, for every e up to 66 (beyond
// int64): 512B, 1KiB, 64MiB, 16EiB.
func pow2(e uint) string {
	u := [...]string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := min(e/10, uint(len(u)-1))
	return fmt.Sprintf("%d%s", uint64(1)<<(e-10*i), u[i])
}

// Duration prints ns with three significant digits in the largest unit
// under which it falls, and no space: 850ns, 12.3µs, 4.56ms, 2.1s; whole
// seconds from 1000s on (1234s). A value that rounds up to 1000 of a unit
// is printed in the next (1ms, not 1e+03µs).
func Duration(ns float64) string {
	a := math.Abs(ns)
	switch {
	case a < 999.5:
		return fmt.Sprintf("%.0fns", ns)
	case a < 999.5e3:
		return fmt.Sprintf("%.3gµs", ns/1e3)
	case a < 999.5e6:
		return fmt.Sprintf("%.3gms", ns/1e6)
	case a < 999.5e9:
		return fmt.Sprintf("%.3gs", ns/1e9)
	}
	return fmt.Sprintf("%.0fs", ns/1e9)
}

// GBps prints a rate in GB/s (1e9 bytes per second) with two decimals:
// 0.10 GB/s, 12.34 GB/s.
func GBps(gbps float64) string { return fmt.Sprintf("%.2f GB/s", gbps) }
