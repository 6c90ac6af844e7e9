package analyze

import "math/bits"

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
