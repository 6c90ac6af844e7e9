package analyze

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Blocks are contiguous, cover every sample once and differ in size by
// at most one.
func TestBlocks(t *testing.T) {
	for _, n := range []int{0, 1, 3, 10, 11, 19, 156} {
		b := Blocks(n, NoiseBlocks)
		if len(b) != min(n, NoiseBlocks) {
			t.Errorf("n %d: %d blocks", n, len(b))
		}
		next := 0
		for _, x := range b {
			if x[0] != next || x[1]-x[0] < n/NoiseBlocks || x[1]-x[0] > n/NoiseBlocks+1 {
				t.Errorf("n %d: blocks %v", n, b)
				break
			}
			next = x[1]
		}
		if next != n {
			t.Errorf("n %d: blocks end at %d", n, next)
		}
	}
}

// The spread of block means of independent samples with a known standard
// deviation is that deviation over the square root of the block size.
func TestBlockSpreadOfKnownVariance(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const mean, sd, n = 100.0, 10.0, 4000 // blocks of 400: the block mean's sd is 0.5
	var rsds []float64
	for range 200 {
		x := make([]float64, n)
		for i := range x {
			x[i] = mean + sd*rng.NormFloat64()
		}
		s := BlockSpread(x)
		if s.Blocks != NoiseBlocks {
			t.Fatalf("blocks %d", s.Blocks)
		}
		rsds = append(rsds, s.RSD)
	}
	want := sd / math.Sqrt(n/NoiseBlocks) / mean
	if got := meanOf(rsds); math.Abs(got-want)/want > 0.05 {
		t.Errorf("mean spread %.5f, want %.5f", got, want)
	}
	if s := BlockSpread([]float64{1, 2}); s.Sampled() {
		t.Errorf("two samples have a spread: %+v", s)
	}
	if s := BlockSpread([]float64{5, 5, 5, 5}); !s.Sampled() || s.RSD != 0 {
		t.Errorf("constant samples: %+v", s)
	}
}

// Ratios and quantiles per block: constant ratios do not vary, and the
// quantile of blocks that differ only by a factor varies by it.
func TestBlockRatioAndQuantileSpread(t *testing.T) {
	num, den := make([]float64, 100), make([]float64, 100)
	for i := range num {
		den[i] = float64(1 + i%7)
		num[i] = 0.25 * den[i]
	}
	if s := BlockRatioSpread(num, den); !s.Sampled() || s.RSD > 1e-12 {
		t.Errorf("a constant ratio varies: %+v", s)
	}
	x := make([]float64, 100)
	for i := range x {
		x[i] = float64(i%10+1) * (1 + float64(i/50)) // the second half twice the first
	}
	// Each block's p95 is 10 in the first half, 20 in the second: 5 of
	// each, so the spread is sd([10 x5, 20 x5]) / 15.
	want := math.Sqrt(10*25.0/9) / 15
	if s := BlockQuantileSpread(x, 0.95); math.Abs(s.RSD-want) > 1e-12 {
		t.Errorf("p95 spread %v, want %v", s.RSD, want)
	}
}

// The t quantiles match the tables, and beyond them approach the normal's.
func TestTQuantile(t *testing.T) {
	for _, c := range []struct{ df, want float64 }{{1, 12.706}, {4, 2.776}, {9, 2.262}, {9.7, 2.262}, {30, 2.042}, {60, 2.000}, {120, 1.980}, {1e6, 1.960}} {
		if got := TQuantile(c.df); math.Abs(got-c.want) > 0.002 {
			t.Errorf("t(%v) = %.4f, want %.3f", c.df, got, c.want)
		}
	}
	if got := WelchDF(1, 9, 1, 9); got != 18 {
		t.Errorf("Welch df of equal variances = %v, want 18", got)
	}
	if got := WelchDF(1, 9, 0, 9); got != 9 {
		t.Errorf("Welch df with one variance 0 = %v, want 9", got)
	}
}

// Two runs drawn from one distribution get an interval that holds no
// change in at least 95% of draws (more: the interval is a stretch of
// a run's, a tenth, not the whole run's mean); a real change of 30% with
// samples that vary by 20% clears it.
func TestRelIntervalCoverage(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	run := func(mean float64) (float64, Spread) {
		x := make([]float64, 200)
		for i := range x {
			x[i] = mean * (1 + 0.2*rng.NormFloat64())
		}
		return meanOf(x), BlockSpread(x)
	}
	const draws = 2000
	held, found := 0, 0
	for range draws {
		a, sa := run(100)
		b, sb := run(100)
		lo, hi, ok := RelInterval(a, b, sa, sb)
		if !ok {
			t.Fatal("no interval")
		}
		if lo <= 0 && hi >= 0 {
			held++
		}
		c, sc := run(130)
		if lo, _, _ := RelInterval(a, c, sa, sc); lo > 0 {
			found++
		}
	}
	if cover := float64(held) / draws; cover < 0.95 {
		t.Errorf("the 95%% interval held the true change in %.1f%% of draws", 100*cover)
	}
	if power := float64(found) / draws; power < 0.99 {
		t.Errorf("a 30%% change was found in %.1f%% of draws", 100*power)
	}
	if _, _, ok := RelInterval(1, 2, Spread{}, Spread{RSD: 0.1, Blocks: 10}); ok {
		t.Error("an interval without one run's spread")
	}
}

// withinNoise: a change inside its interval or under the floor has no
// verdict; a fall is measured by the same factor as a rise.
func TestWithinNoise(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, c := range []struct {
		c    Change
		want bool
	}{
		{Change{Rel: f(0.2), CILow: f(-0.05), CIHigh: f(0.5), NoiseRel: 0.3}, true},
		{Change{Rel: f(0.2), CILow: f(0.05), CIHigh: f(0.35), NoiseRel: 0.14}, false},
		{Change{Rel: f(0.015), CILow: f(0.01), CIHigh: f(0.02), NoiseRel: NoiseFloor}, true},
		{Change{Rel: f(0.09), NoiseRel: UnsampledFloor}, true},
		{Change{Rel: f(-0.09), NoiseRel: UnsampledFloor}, true}, // 1/1.1 = −9.1%: the same factor
		{Change{Rel: f(-0.12), NoiseRel: UnsampledFloor}, false},
		{Change{Rel: f(0.11), NoiseRel: UnsampledFloor}, false},
	} {
		if got := withinNoise(c.c); got != c.want {
			t.Errorf("rel %v, interval %v..%v, noise %v: within %v, want %v", *c.c.Rel, c.c.CILow, c.c.CIHigh, c.c.NoiseRel, got, c.want)
		}
	}
}
