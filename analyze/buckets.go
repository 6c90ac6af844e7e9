package analyze

import (
	"fmt"
	"math/bits"
)

// SizeBucket returns the log2 size bucket of b bytes: 0 for 0 bytes, else
// k such that 2^(k-1) <= b < 2^k.
func SizeBucket(b int64) int {
	if b <= 0 {
		return 0
	}
	return bits.Len64(uint64(b))
}

// BucketRange returns the bytes bucket k covers, [lo, hi).
func BucketRange(k int) (lo, hi int64) {
	if k <= 0 {
		return 0, 1
	}
	return 1 << (k - 1), 1 << k
}

// BucketLabel names bucket k the way tables show it: "64KiB-128KiB".
func BucketLabel(k int) string {
	if k <= 0 {
		return "0B"
	}
	lo, hi := BucketRange(k)
	return HumanBytes(lo) + "-" + HumanBytes(hi)
}

// HumanBytes prints a power-of-two friendly size: 512B, 64KiB, 1.5MiB.
func HumanBytes(b int64) string {
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
