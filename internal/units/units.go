// Package units formats sizes, durations, rates and shares for people. It
// is the one set of formatters behind commprof's findings, tables, pages
// and command output, so that a figure reads the same everywhere; the
// pages' scripts have their counterpart in report/assets/format.js, held
// to the same outputs by one table of cases (testdata/format.json) that
// both test suites run.
//
// Sizes are in binary units (KiB = 1024 bytes), as buffer sizes are given;
// rates in decimal GB/s (GB = 1e9 bytes), as bus bandwidth is. A number
// has three significant digits (two decimals below 10, one below 100,
// none above), rounded half away from zero on its exact value, with no
// trailing zeros, and a space before its unit: 850 ns, 12.3 µs, 1.5 MiB,
// 8.12 GB/s.
package units

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Bytes prints a size in bytes with a power-of-two unit: 512 B, 1,000 B,
// 64 KiB, 1.5 MiB, 124 MiB. A negative size prints as its magnitude after
// a minus sign.
func Bytes(b int64) string {
	if b < 0 {
		if b == math.MinInt64 {
			return "-8 EiB"
		}
		return "-" + Bytes(-b)
	}
	if b < 1024 {
		return Int(float64(b)) + " B"
	}
	u := [...]string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v, i := float64(b)/1024, 0
	for v >= 1023.5 && i < len(u)-1 {
		v /= 1024
		i++
	}
	return sig(v) + " " + u[i]
}

// Bucket names the log2 size bucket k as tables show it: bucket k holds
// sizes from 2^(k-1) up to, not including, 2^k ("64KiB-128KiB"), and
// bucket 0 (or less) holds 0 bytes ("0B"). A bucket is a name, written
// without spaces.
func Bucket(k int) string {
	if k <= 0 {
		return "0B"
	}
	return pow2(uint(k-1)) + "-" + pow2(uint(k))
}

// pow2 prints 2^e bytes without a space, for every e up to 66 (beyond
// int64): 512B, 1KiB, 64MiB, 16EiB.
func pow2(e uint) string {
	u := [...]string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := min(e/10, uint(len(u)-1))
	return fmt.Sprintf("%d%s", uint64(1)<<(e-10*i), u[i])
}

// Duration prints ns in the largest unit it reaches once rounded: 850 ns,
// 12.3 µs, 4.56 ms, 2.1 s, 1234 s (999.7 µs is 1 ms).
func Duration(ns float64) string {
	a := math.Abs(ns)
	switch {
	case a < 999.5:
		return fixed(ns, 0) + " ns"
	case a < 999.5e3:
		return sig(ns/1e3) + " µs"
	case a < 999.5e6:
		return sig(ns/1e6) + " ms"
	}
	return sig(ns/1e9) + " s"
}

// GBps prints a rate given in GB/s (1e9 bytes per second): 8.12 GB/s,
// 0.1 GB/s, 1,250 GB/s, and in MB/s below 0.01 GB/s (5 MB/s).
func GBps(v float64) string {
	switch {
	case v >= 1000:
		return Int(v) + " GB/s"
	case v >= 0.01 || v <= 0:
		return sig(v) + " GB/s"
	}
	return sig(v*1000) + " MB/s"
}

// Percent prints a share (0.125) as a percentage with at most decimals
// decimals and no trailing zeros: 12.5%, 50%.
func Percent(f float64, decimals int) string { return fixed(100*f, decimals) + "%" }

// Int prints a number rounded to a whole one (half up, as JavaScript's
// Math.round), with thousands separators: 1,234,567.
func Int(v float64) string {
	r := math.Floor(v + 0.5)
	if math.IsInf(r, 0) || math.IsNaN(r) {
		return strconv.FormatFloat(r, 'f', -1, 64)
	}
	s := strconv.FormatFloat(math.Abs(r), 'f', 0, 64)
	var b strings.Builder
	if r < 0 {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// sig prints x with three significant digits for magnitudes from 0.001 to
// 999, and whole numbers above.
func sig(x float64) string {
	switch a := math.Abs(x); {
	case a >= 100:
		return fixed(x, 0)
	case a >= 10:
		return fixed(x, 1)
	}
	return fixed(x, 2)
}

// fixed rounds x to d decimals, half away from zero on x's exact binary
// value, and drops trailing zeros and a trailing point: JavaScript's
// String(+x.toFixed(d)), so that a page's script and Go print a figure
// alike. Minus zero prints as 0.
func fixed(x float64, d int) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	r := new(big.Rat).SetFloat64(math.Abs(x))
	scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d)), nil)
	r.Mul(r, new(big.Rat).SetInt(scale))
	r.Add(r, big.NewRat(1, 2))
	q := new(big.Int).Quo(r.Num(), r.Denom()).String()
	if d > 0 {
		if len(q) <= d {
			q = strings.Repeat("0", d-len(q)+1) + q
		}
		q = q[:len(q)-d] + "." + q[len(q)-d:]
		q = strings.TrimRight(strings.TrimRight(q, "0"), ".")
	}
	if x < 0 && strings.Trim(q, "0.") != "" {
		return "-" + q
	}
	return q
}
