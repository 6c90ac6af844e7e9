package trainer

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/commprof/commprof/collectives"
)

func testConfig(batch int) Config {
	return Config{Hidden: []int{32, 16}, BatchSize: batch, Epochs: 1, LR: 0.05, Momentum: 0.9, LRScaling: "none", Seed: 7, BucketBytes: 2048, Overlap: true}
}

// TestGradientAgainstFiniteDifferences checks Backward against the loss.
func TestGradientAgainstFiniteDifferences(t *testing.T) {
	d := Synthetic(6, 1)
	m, err := NewMLP([]int{Pixels, 5, Classes}, 3)
	if err != nil {
		t.Fatal(err)
	}
	m.Forward(d.Images, 6, false)
	m.Backward(d.Labels, nil)
	grads := append([]float32(nil), m.Grads...)
	for _, i := range []int{0, 17, 3920, 3925, len(m.Params) - 11, len(m.Params) - 1} {
		old := m.Params[i]
		const h = 1e-2
		m.Params[i] = old + h
		m.Forward(d.Images, 6, false)
		lp, _ := m.Loss(d.Labels)
		m.Params[i] = old - h
		m.Forward(d.Images, 6, false)
		lm, _ := m.Loss(d.Labels)
		m.Params[i] = old
		num := (lp - lm) / (2 * h)
		if math.Abs(num-float64(grads[i])) > 1e-3+0.05*math.Abs(num) {
			t.Errorf("param %d: backward %v, finite difference %v", i, grads[i], num)
		}
	}
}

// runRanks trains k steps on n in-process ranks with per-rank batch b and
// returns rank 0's parameters.
func runRanks(t *testing.T, n, b, k int, overlap bool, mods ...func(*Config)) []float32 {
	t.Helper()
	train, test := Synthetic(512, 1), Synthetic(64, 2)
	ts := collectives.NewLocal(n)
	var out []float32
	var wg sync.WaitGroup
	errs := make([]error, n)
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer ts[r].Close()
			c, err := collectives.New(ts[r], collectives.Config{})
			if err != nil {
				errs[r] = err
				return
			}
			cfg := testConfig(b)
			cfg.Overlap = overlap
			for _, m := range mods {
				m(&cfg)
			}
			tr, err := New(context.Background(), c, nil, cfg, train, test)
			if err != nil {
				errs[r] = err
				return
			}
			order := tr.perm(0)
			for s := range k {
				base := s * n * b
				if _, _, _, err := tr.Step(context.Background(), order[base+r*b:base+(r+1)*b], tr.lr(float64(s)/10)); err != nil {
					errs[r] = err
					return
				}
			}
			if r == 0 {
				out = tr.Model.Weights()
			}
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return out
}

// TestDataParallelIsExact: 4 ranks with batch 8 end where one process with
// batch 32 ends, step for step.
func TestDataParallelIsExact(t *testing.T) {
	one := runRanks(t, 1, 32, 6, true)
	for _, overlap := range []bool{true, false} {
		four := runRanks(t, 4, 8, 6, overlap)
		var worst float64
		for i := range one {
			d := math.Abs(float64(one[i] - four[i]))
			worst = max(worst, d/(1e-3+math.Abs(float64(one[i]))))
		}
		if worst > 1e-4 {
			t.Errorf("overlap %v: parameters differ by up to %.2g (relative) after 6 steps", overlap, worst)
		}
	}
	for _, servers := range []int{1, 2, 4} {
		ps := runRanks(t, 4, 8, 6, false, func(c *Config) { c.Sync, c.Servers = "ps", servers })
		if !equalWithin(one, ps, 1e-4) {
			t.Errorf("parameter server with %d servers: parameters differ from one process", servers)
		}
	}
	adam := func(c *Config) { c.Optimizer, c.LR, c.Decay, c.Epochs = "adam", 0.001, "cosine", 2 }
	if !equalWithin(runRanks(t, 1, 32, 6, true, adam), runRanks(t, 4, 8, 6, true, adam), 1e-3) {
		t.Error("Adam with cosine decay: 4 ranks × 8 differ from 1 × 32")
	}
	// A different batch split must not match: the test can fail.
	if other := runRanks(t, 2, 8, 6, true); equalWithin(one, other, 1e-4) {
		t.Error("2 ranks × 8 matched 1 × 32: the comparison proves nothing")
	}
}

func equalWithin(a, b []float32, tol float64) bool {
	for i := range a {
		if math.Abs(float64(a[i]-b[i])) > tol*(1e-3+math.Abs(float64(a[i]))) {
			return false
		}
	}
	return true
}

func TestLearnsTheSyntheticSet(t *testing.T) {
	train, test := Synthetic(6000, 1), Synthetic(1000, 2)
	ts := collectives.NewLocal(1)
	defer ts[0].Close()
	c, _ := collectives.New(ts[0], collectives.Config{})
	cfg := Config{Hidden: []int{64}, BatchSize: 32, Epochs: 2, LR: 0.05, Momentum: 0.9, LRScaling: "none", Seed: 1, BucketBytes: 1 << 20, Overlap: true}
	tr, err := New(context.Background(), c, nil, cfg, train, test)
	if err != nil {
		t.Fatal(err)
	}
	var last Epoch
	if err := tr.Run(context.Background(), nil, func(e Epoch) { last = e }); err != nil {
		t.Fatal(err)
	}
	if last.TestAcc < 0.95 {
		t.Fatalf("test accuracy %.3f after %d epochs, want at least 0.95", last.TestAcc, cfg.Epochs)
	}
}

func TestBadConfig(t *testing.T) {
	good := testConfig(8)
	for name, mod := range map[string]func(*Config){
		"batch 0":         func(c *Config) { c.BatchSize = 0 },
		"batch too large": func(c *Config) { c.BatchSize = 1000 },
		"no epochs":       func(c *Config) { c.Epochs = 0 },
		"lr":              func(c *Config) { c.LR = -1 },
		"momentum":        func(c *Config) { c.Momentum = 1 },
		"scaling":         func(c *Config) { c.LRScaling = "cubic" },
		"hidden":          func(c *Config) { c.Hidden = []int{0} },
	} {
		c := good
		mod(&c)
		if c.Validate(4, 512) == nil {
			t.Errorf("%s accepted", name)
		}
	}
}

func writeIDX(t *testing.T, path string, magic uint32, dims []uint32, data []byte, gz bool) {
	t.Helper()
	var buf bytes.Buffer
	_ = binary.Write(&buf, binary.BigEndian, magic)
	_ = binary.Write(&buf, binary.BigEndian, dims)
	buf.Write(data)
	b := buf.Bytes()
	if gz {
		var z bytes.Buffer
		w := gzip.NewWriter(&z)
		w.Write(b)
		w.Close()
		b = z.Bytes()
		path += ".gz"
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadIDX(t *testing.T) {
	dir := t.TempDir()
	img := make([]byte, 3*Pixels)
	img[5], img[Pixels+6] = 255, 51
	writeIDX(t, filepath.Join(dir, "train-images-idx3-ubyte"), 0x803, []uint32{3, 28, 28}, img, true)
	writeIDX(t, filepath.Join(dir, "train-labels-idx1-ubyte"), 0x801, []uint32{3}, []byte{1, 2, 9}, false)
	writeIDX(t, filepath.Join(dir, "t10k-images-idx3-ubyte"), 0x803, []uint32{1, 28, 28}, make([]byte, Pixels), false)
	writeIDX(t, filepath.Join(dir, "t10k-labels-idx1-ubyte"), 0x801, []uint32{1}, []byte{4}, true)
	train, test, err := LoadIDX(dir)
	if err != nil {
		t.Fatal(err)
	}
	if train.Len() != 3 || test.Len() != 1 || train.Labels[2] != 9 || train.Images[5] != 1 || train.Images[Pixels+6] != 0.2 {
		t.Fatalf("train %d test %d labels %v", train.Len(), test.Len(), train.Labels)
	}
	// Broken inputs are refused with the file named.
	writeIDX(t, filepath.Join(dir, "t10k-labels-idx1-ubyte"), 0x801, []uint32{1}, []byte{12}, false)
	if _, _, err := LoadIDX(dir); err == nil || !strings.Contains(err.Error(), "not a class") {
		t.Errorf("label 12: %v", err)
	}
	writeIDX(t, filepath.Join(dir, "t10k-labels-idx1-ubyte"), 0x803, []uint32{1}, []byte{1}, false)
	if _, _, err := LoadIDX(dir); err == nil || !strings.Contains(err.Error(), "t10k-labels-idx1-ubyte: not an IDX file") {
		t.Errorf("wrong magic: %v", err)
	}
	writeIDX(t, filepath.Join(dir, "t10k-labels-idx1-ubyte"), 0x801, []uint32{5}, []byte{1}, false)
	if _, _, err := LoadIDX(dir); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("short file: %v", err)
	}
	if _, _, err := LoadIDX(t.TempDir()); err == nil || !strings.Contains(err.Error(), "train-images-idx3-ubyte") {
		t.Errorf("empty directory: %v", err)
	}
}

func TestSchedules(t *testing.T) {
	ts := collectives.NewLocal(1)
	defer ts[0].Close()
	c, _ := collectives.New(ts[0], collectives.Config{})
	tr := &Trainer{c: c, cfg: Config{LR: 0.1, LRScaling: "linear", WarmupEpochs: 1, Epochs: 3, Decay: "cosine"}}
	// One rank: linear scaling is ×1; warm-up from 0.1 to 0.1; cosine from 0.1 at epoch 1 to 0 at epoch 3.
	for epoch, want := range map[float64]float64{0: 0.1, 1: 0.1, 2: 0.05, 3: 0} {
		if got := tr.lr(epoch); math.Abs(got-want) > 1e-12 {
			t.Errorf("lr(%v) = %v, want %v", epoch, got, want)
		}
	}
	// Four ranks: warm up from 0.1 to 0.4 (linear) or 0.2 (sqrt) over the first epoch.
	ts4 := collectives.NewLocal(4)
	defer func() {
		for _, x := range ts4 {
			x.Close()
		}
	}()
	c4, _ := collectives.New(ts4[0], collectives.Config{})
	for scaling, wants := range map[string][3]float64{"linear": {0.1, 0.25, 0.4}, "sqrt": {0.1, 0.15, 0.2}, "none": {0.1, 0.1, 0.1}} {
		tr := &Trainer{c: c4, cfg: Config{LR: 0.1, LRScaling: scaling, WarmupEpochs: 1, Epochs: 3}}
		for i, epoch := range []float64{0, 0.5, 2} {
			if got := tr.lr(epoch); math.Abs(got-wants[i]) > 1e-12 {
				t.Errorf("%s: lr(%v) = %v, want %v", scaling, epoch, got, wants[i])
			}
		}
	}
	// A base batch: batch 512 on 4 ranks is 32 times a global batch of
	// 64, whatever the rank count.
	for scaling, want := range map[string]float64{"linear": 3.2, "sqrt": 0.1 * math.Sqrt(32), "none": 0.1} {
		tr := &Trainer{c: c4, cfg: Config{LR: 0.1, LRScaling: scaling, LRBaseBatch: 64, BatchSize: 512, Epochs: 3}}
		if got := tr.lr(1); math.Abs(got-want) > 1e-12 {
			t.Errorf("%s with base batch 64: lr = %v, want %v", scaling, got, want)
		}
	}
}

// TestCNNGradient checks the CNN's backward pass against finite
// differences in every layer (without dropout).
func TestCNNGradient(t *testing.T) {
	d := Synthetic(3, 5)
	m := NewCNN(3, 0)
	// On the blank background every pre-activation equals its bias, zero
	// at first: exactly a ReLU kink, where finite differences say nothing.
	for l := 1; l <= 4; l++ {
		lo, hi := m.Range(l)
		for i := lo + cnnShapes[l-1][0]*cnnShapes[l-1][1]; i < hi; i++ {
			m.Weights()[i] = 0.05
		}
	}
	m.Forward(d.Images, 3, false)
	m.Backward(d.Labels, nil)
	grads := append([]float32(nil), m.Gradients()...)
	p := m.Weights()
	for l := 1; l <= 4; l++ {
		lo, hi := m.Range(l)
		for _, i := range []int{lo, lo + (hi-lo)/3, hi - 1} {
			old := p[i]
			// A bias moves every position of its channel: a small step.
			h := float32(1e-2)
			if i >= lo+cnnShapes[l-1][0]*cnnShapes[l-1][1] {
				h = 1e-3
			}
			p[i] = old + h
			m.Forward(d.Images, 3, false)
			lp, _ := m.Loss(d.Labels)
			p[i] = old - h
			m.Forward(d.Images, 3, false)
			lm, _ := m.Loss(d.Labels)
			p[i] = old
			num := (lp - lm) / (2 * float64(h))
			if math.Abs(num-float64(grads[i])) > 2e-3+0.05*math.Abs(num) {
				t.Errorf("layer %d param %d: backward %v, finite difference %v", l, i, grads[i], num)
			}
		}
	}
}

func TestBar(t *testing.T) {
	for _, tc := range []struct {
		done, total int
		want        string
	}{{0, 10, "[..........]   0%"}, {5, 10, "[#####.....]  50%"}, {10, 10, "[##########] 100%"}, {1, 3, "[###.......]  33%"}} {
		if got := bar(tc.done, tc.total, 10); got != tc.want {
			t.Errorf("bar(%d, %d) = %q, want %q", tc.done, tc.total, got, tc.want)
		}
	}
}
