package trainer

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/commprof/commprof/collectives"
	"github.com/commprof/commprof/trace"
)

// Recorder receives the trainer's compute spans, steps and marks; the
// profiler's *interpose.Recorder is one. Times come from its Now.
type Recorder interface {
	Now() int64
	SetStep(step int)
	Compute(name string, start int64)
	StepSpan(step int, start int64)
	Mark(name string, value float64)
}

type noRecorder struct{ t0 time.Time }

func (n noRecorder) Now() int64          { return int64(time.Since(n.t0)) }
func (noRecorder) SetStep(int)           {}
func (noRecorder) Compute(string, int64) {}
func (noRecorder) StepSpan(int, int64)   {}
func (noRecorder) Mark(string, float64)  {}

// Config is a training run's configuration; every rank must use the same.
type Config struct {
	Model        string  // mlp (the default) or cnn
	Hidden       []int   // hidden layer sizes of the mlp
	BatchSize    int     // per rank
	Epochs       int     //
	LR           float64 // base learning rate, for one rank
	Momentum     float64 // SGD momentum, or Adam's beta1
	Optimizer    string  // sgd (with momentum, the default) or adam
	Decay        string  // none (the default) or cosine: the learning rate falls to 0 over the epochs after warm-up
	LRScaling    string  // none, linear or sqrt: multiply LR by k or sqrt(k), k the global batch over LRBaseBatch
	LRBaseBatch  int     // the global batch LR is for; 0 means one rank's batch, so k is the rank count
	WarmupEpochs float64 // ramp the LR from base to scaled over this many epochs
	Seed         uint64
	BucketBytes  int  // gradient allreduce bucket size
	Overlap      bool // start each bucket's allreduce as soon as backward has produced it
	// Sync is "allreduce" (the default) or "ps": a parameter server whose
	// Servers ranks each own a shard of the parameters. Every rank still
	// trains; each step it pushes its gradient's shards to their servers,
	// which average them, apply the optimizer and send the new shard back
	// to every rank: many-to-few and few-to-many instead of a ring.
	Sync    string
	Servers int
}

// Validate checks a configuration for a world of n ranks and a training
// set of size samples.
func (c Config) Validate(n, samples int) error {
	switch {
	case c.BatchSize < 1:
		return fmt.Errorf("batch size %d: want at least 1", c.BatchSize)
	case c.BatchSize*n > samples:
		return fmt.Errorf("batch size %d on %d ranks is a global batch of %d, larger than the %d training images", c.BatchSize, n, c.BatchSize*n, samples)
	case c.Epochs < 1:
		return fmt.Errorf("%d epochs: want at least 1", c.Epochs)
	case c.LR <= 0 || math.IsNaN(c.LR):
		return fmt.Errorf("learning rate %v: want a positive number", c.LR)
	case c.Momentum < 0 || c.Momentum >= 1:
		return fmt.Errorf("momentum %v: want 0 <= momentum < 1", c.Momentum)
	case c.LRScaling != "none" && c.LRScaling != "linear" && c.LRScaling != "sqrt":
		return fmt.Errorf("learning-rate scaling %q: want none, linear or sqrt", c.LRScaling)
	case c.LRBaseBatch < 0:
		return fmt.Errorf("learning-rate base batch %d: want 0 (one rank's batch) or more", c.LRBaseBatch)
	case c.WarmupEpochs < 0:
		return fmt.Errorf("warm-up of %v epochs: want 0 or more", c.WarmupEpochs)
	case c.BucketBytes < 4:
		return fmt.Errorf("bucket of %d bytes: want at least 4", c.BucketBytes)
	case c.Optimizer != "" && c.Optimizer != "sgd" && c.Optimizer != "adam":
		return fmt.Errorf("optimizer %q: want sgd or adam", c.Optimizer)
	case c.Decay != "" && c.Decay != "none" && c.Decay != "cosine":
		return fmt.Errorf("decay %q: want none or cosine", c.Decay)
	case c.Model != "" && c.Model != "mlp" && c.Model != "cnn":
		return fmt.Errorf("model %q: want mlp or cnn", c.Model)
	case c.Sync != "" && c.Sync != "allreduce" && c.Sync != "ps":
		return fmt.Errorf("synchronisation %q: want allreduce or ps", c.Sync)
	case c.Sync == "ps" && (c.Servers < 1 || c.Servers > n):
		return fmt.Errorf("%d parameter servers on %d ranks: want 1 to %d", c.Servers, n, n)
	}
	for _, h := range c.Hidden {
		if h < 1 || h > 1<<16 {
			return fmt.Errorf("hidden layer of %d units: want 1 to 65536", h)
		}
	}
	return nil
}

// Epoch is one epoch's result, averaged over all ranks.
type Epoch struct {
	Epoch     int
	Loss      float64
	TrainAcc  float64
	TestAcc   float64
	Images    int // trained on, over all ranks
	Seconds   float64
	LR        float64
	CommShare float64 // fraction of step time this rank waited for gradient allreduces
}

// Trainer trains one rank's replica.
type Trainer struct {
	cfg         Config
	c           collectives.Communicator
	rec         Recorder
	Model       Model
	vel, sq     []float32 // momentum (Adam: first moment) and Adam's second moment
	buckets     [][2]int  // ranges of Grads, last layers first
	bucketOf    []int     // per layer, the bucket whose allreduce it completes (-1: not the last)
	train, test *Dataset
	step        int
	spanNames   []string // "backward/denseL" per layer
}

// New makes a rank's trainer. Every rank gets the same initial parameters
// (rank 0's, broadcast).
func New(ctx context.Context, c collectives.Communicator, rec Recorder, cfg Config, train, test *Dataset) (*Trainer, error) {
	if rec == nil {
		rec = noRecorder{time.Now()}
	}
	if err := cfg.Validate(c.Size(), train.Len()); err != nil {
		return nil, err
	}
	var m Model
	switch cfg.Model {
	case "", "mlp":
		sizes := append(append([]int{Pixels}, cfg.Hidden...), Classes)
		mlp, err := NewMLP(sizes, cfg.Seed)
		if err != nil {
			return nil, err
		}
		m = mlp
	case "cnn":
		m = NewCNN(cfg.Seed, uint64(c.Rank()))
	default:
		return nil, fmt.Errorf("model %q: want mlp or cnn", cfg.Model)
	}
	t := &Trainer{cfg: cfg, c: c, rec: rec, Model: m, vel: make([]float32, len(m.Weights())), train: train, test: test}
	if cfg.Optimizer == "adam" {
		t.sq = make([]float32, len(m.Weights()))
	}
	t.spanNames = make([]string, m.Layers()+1)
	for l := 1; l <= m.Layers(); l++ {
		t.spanNames[l] = fmt.Sprintf("backward/dense%d", l)
	}
	// Buckets: consecutive layers from the last, each at least BucketBytes.
	t.bucketOf = make([]int, m.Layers()+1)
	hi := len(m.Weights())
	for l := m.Layers(); l >= 1; l-- {
		t.bucketOf[l] = -1
		lo, _ := m.Range(l)
		if (hi-lo)*4 >= cfg.BucketBytes || l == 1 {
			t.bucketOf[l] = len(t.buckets)
			t.buckets = append(t.buckets, [2]int{lo, hi})
			hi = lo
		}
	}
	if err := c.Broadcast(ctx, collectives.Float32s(m.Weights()), 0); err != nil {
		return nil, fmt.Errorf("broadcasting the initial parameters: %w", err)
	}
	return t, nil
}

// Buckets returns the gradient ranges allreduced together.
func (t *Trainer) Buckets() [][2]int { return t.buckets }

// lr returns the learning rate at a fractional epoch.
func (t *Trainer) lr(epoch float64) float64 {
	n := float64(t.c.Size())
	if t.cfg.LRBaseBatch > 0 {
		n = float64(t.cfg.BatchSize*t.c.Size()) / float64(t.cfg.LRBaseBatch)
	}
	scaled := t.cfg.LR
	switch t.cfg.LRScaling {
	case "linear":
		scaled *= n
	case "sqrt":
		scaled *= math.Sqrt(n)
	}
	if t.cfg.WarmupEpochs > 0 && epoch < t.cfg.WarmupEpochs {
		return t.cfg.LR + (scaled-t.cfg.LR)*epoch/t.cfg.WarmupEpochs
	}
	if t.cfg.Decay == "cosine" {
		span := float64(t.cfg.Epochs) - t.cfg.WarmupEpochs
		if span > 0 {
			return scaled * 0.5 * (1 + math.Cos(math.Pi*(epoch-t.cfg.WarmupEpochs)/span))
		}
	}
	return scaled
}

// update applies the optimizer to params[lo:hi] with the summed gradient
// g (of n ranks): SGD with momentum, or Adam.
func (t *Trainer) update(lo int, g []float32, n int, lr float64) {
	p := t.Model.Weights()[lo : lo+len(g)]
	v := t.vel[lo : lo+len(g)]
	inv := 1 / float32(n)
	if t.cfg.Optimizer != "adam" {
		mu, eta := float32(t.cfg.Momentum), float32(lr)
		for i := range p {
			v[i] = mu*v[i] + g[i]*inv
			p[i] -= eta * v[i]
		}
		return
	}
	const beta2, eps = 0.999, 1e-8
	b1 := t.cfg.Momentum
	step := float64(t.step + 1)
	c1, c2 := 1-math.Pow(b1, step), 1-math.Pow(beta2, step)
	m2 := t.sq[lo : lo+len(g)]
	for i := range p {
		gi := g[i] * inv
		v[i] = float32(b1)*v[i] + float32(1-b1)*gi
		m2[i] = beta2*m2[i] + (1-beta2)*gi*gi
		p[i] -= float32(lr * (float64(v[i]) / c1) / (math.Sqrt(float64(m2[i])/c2) + eps))
	}
}

// StepsPerEpoch is how many global batches one epoch has.
func (t *Trainer) StepsPerEpoch() int { return t.train.Len() / (t.cfg.BatchSize * t.c.Size()) }

// perm returns the global order of the training images in an epoch; every
// rank computes the same one and takes its part of each global batch.
func (t *Trainer) perm(epoch int) []int {
	return rand.New(rand.NewPCG(t.cfg.Seed, uint64(epoch)+1)).Perm(t.train.Len())
}

// Step trains on one global batch: this rank's part is images idx. It
// returns this rank's loss and correct count, and how long it waited for
// gradients after its own backward pass.
func (t *Trainer) Step(ctx context.Context, idx []int, lr float64) (loss float64, correct int, wait time.Duration, err error) {
	rec := t.rec
	rec.SetStep(t.step)
	stepStart := rec.Now()
	b := len(idx)
	s0 := rec.Now()
	x := make([]float32, b*Pixels)
	y := make([]uint8, b)
	for i, j := range idx {
		copy(x[i*Pixels:], t.train.Image(j))
		y[i] = t.train.Labels[j]
	}
	rec.Compute("data", s0)
	s0 = rec.Now()
	t.Model.Forward(x, b, true)
	loss, correct = t.Model.Loss(y)
	rec.Compute("forward", s0)

	n := t.c.Size()
	if t.cfg.Sync == "ps" {
		s0 = rec.Now()
		t.Model.Backward(y, func(l int) {
			rec.Compute(t.spanNames[l], s0)
			s0 = rec.Now()
		})
		w0 := time.Now()
		if err := t.pushPull(ctx, lr); err != nil {
			return 0, 0, 0, err
		}
		rec.StepSpan(t.step, stepStart)
		t.step++
		return loss, correct, time.Since(w0), nil
	}
	reqs := make([]collectives.Request, 0, len(t.buckets))
	s0 = rec.Now()
	t.Model.Backward(y, func(l int) {
		rec.Compute(t.spanNames[l], s0)
		s0 = rec.Now()
		if k := t.bucketOf[l]; k >= 0 && t.cfg.Overlap && n > 1 {
			r := t.buckets[k]
			reqs = append(reqs, t.c.IAllReduce(ctx, collectives.Float32s(t.Model.Gradients()[r[0]:r[1]]), collectives.Sum))
		}
	})
	w0 := time.Now()
	if n > 1 {
		if !t.cfg.Overlap {
			for _, r := range t.buckets {
				if err := t.c.AllReduce(ctx, collectives.Float32s(t.Model.Gradients()[r[0]:r[1]]), collectives.Sum); err != nil {
					return 0, 0, 0, fmt.Errorf("averaging gradients: %w", err)
				}
			}
		}
		for _, r := range reqs {
			if werr := r.Wait(); werr != nil && err == nil {
				err = fmt.Errorf("averaging gradients: %w", werr)
			}
		}
		if err != nil {
			return 0, 0, 0, err
		}
	}
	wait = time.Since(w0)
	s0 = rec.Now()
	t.update(0, t.Model.Gradients(), n, lr)
	rec.Compute("optimizer", s0)
	rec.StepSpan(t.step, stepStart)
	t.step++
	return loss, correct, wait, nil
}

// pushPull is one parameter-server step: every rank sends shard k of its
// gradient to server k; server k sums the shards, applies SGD with momentum
// to its shard of the parameters and sends it to every rank.
func (t *Trainer) pushPull(ctx context.Context, lr float64) error {
	n, r, k := t.c.Size(), t.c.Rank(), t.cfg.Servers
	p, g := t.Model.Weights(), t.Model.Gradients()
	tag := 2 * t.step
	for s := range k {
		lo, hi := collectives.BlockRange(len(g), k, s)
		if err := t.c.Send(ctx, collectives.Float32s(g[lo:hi]), s, tag); err != nil {
			return fmt.Errorf("pushing gradients to server %d: %w", s, err)
		}
	}
	if r < k {
		s0 := t.rec.Now()
		lo, hi := collectives.BlockRange(len(g), k, r)
		sum := make([]float32, hi-lo)
		in := make([]float32, hi-lo)
		for w := range n {
			if err := t.c.Recv(ctx, collectives.Float32s(in), w, tag); err != nil {
				return fmt.Errorf("server %d: gradients from rank %d: %w", r, w, err)
			}
			for i, v := range in {
				sum[i] += v
			}
		}
		t.update(lo, sum, n, lr)
		t.rec.Compute("optimizer", s0)
		for w := range n {
			if err := t.c.Send(ctx, collectives.Float32s(p[lo:hi]), w, tag+1); err != nil {
				return fmt.Errorf("server %d: parameters to rank %d: %w", r, w, err)
			}
		}
	}
	for s := range k {
		lo, hi := collectives.BlockRange(len(p), k, s)
		if err := t.c.Recv(ctx, collectives.Float32s(p[lo:hi]), s, tag+1); err != nil {
			return fmt.Errorf("pulling parameters from server %d: %w", s, err)
		}
	}
	return nil
}

// Evaluate returns the accuracy on the test set, each rank scoring its
// share and the counts summed over ranks.
func (t *Trainer) Evaluate(ctx context.Context) (float64, error) {
	lo, hi := collectives.BlockRange(t.test.Len(), t.c.Size(), t.c.Rank())
	correct := 0
	chunk := t.cfg.BatchSize // the size the model's buffers already have
	for s := lo; s < hi; s += chunk {
		e := min(s+chunk, hi)
		t.Model.Forward(t.test.Images[s*Pixels:e*Pixels], e-s, false)
		_, c := t.Model.Loss(t.test.Labels[s:e])
		correct += c
	}
	counts := []float64{float64(correct)}
	if err := t.c.AllReduce(ctx, collectives.Float64s(counts), collectives.Sum); err != nil {
		return 0, fmt.Errorf("counting test results: %w", err)
	}
	return counts[0] / float64(t.test.Len()), nil
}

// Run trains for the configured epochs, calling each after every epoch
// (on every rank) with the averaged figures. Rank 0 writes a progress
// line to progress (nil for none) after the first step and every few
// seconds after.
func (t *Trainer) Run(ctx context.Context, progress io.Writer, each func(Epoch)) error {
	n, r := t.c.Size(), t.c.Rank()
	b := t.cfg.BatchSize
	steps := t.StepsPerEpoch()
	var lastPrint time.Time // the first step's line shows at once that training runs
	for ep := range t.cfg.Epochs {
		start := time.Now()
		order := t.perm(ep)
		var loss float64
		var correct int
		var waited time.Duration
		lr := 0.0
		for s := range steps {
			if err := ctx.Err(); err != nil {
				return err
			}
			lr = t.lr(float64(ep) + float64(s)/float64(steps))
			base := s * n * b
			l, c, w, err := t.Step(ctx, order[base+r*b:base+(r+1)*b], lr)
			if err != nil {
				return fmt.Errorf("epoch %d step %d: %w", ep+1, s, err)
			}
			loss += l
			correct += c
			waited += w
			// A line every few seconds: the output often goes through a
			// launcher or a log, where carriage returns do not work.
			if progress != nil && r == 0 && time.Since(lastPrint) >= 3*time.Second {
				lastPrint = time.Now()
				el := time.Since(start).Seconds()
				fmt.Fprintf(progress, "epoch %d/%d %s step %d/%d  loss %.4f  %.0f images/s\n",
					ep+1, t.cfg.Epochs, bar(s+1, steps, 20), s+1, steps, loss/float64(s+1), float64((s+1)*n*b)/el)
			}
		}
		sums := []float64{loss / float64(steps), float64(correct)}
		if err := t.c.AllReduce(ctx, collectives.Float64s(sums), collectives.Sum); err != nil {
			return fmt.Errorf("epoch %d: averaging the loss: %w", ep+1, err)
		}
		acc, err := t.Evaluate(ctx)
		if err != nil {
			return err
		}
		e := Epoch{Epoch: ep + 1, Loss: sums[0] / float64(n), TrainAcc: sums[1] / float64(steps*n*b), TestAcc: acc,
			Images: steps * n * b, Seconds: time.Since(start).Seconds(), LR: lr}
		if el := time.Since(start); el > 0 {
			e.CommShare = waited.Seconds() / el.Seconds()
		}
		t.rec.Mark(trace.MetricLoss, e.Loss)
		t.rec.Mark(trace.MetricTrainAccuracy, e.TrainAcc)
		t.rec.Mark(trace.MetricTestAccuracy, e.TestAcc)
		t.rec.Mark(trace.MetricLR, lr)
		t.rec.Mark(trace.MetricEpoch, float64(ep+1)) // last: the epoch's figures are all in
		if each != nil {
			each(e)
		}
	}
	return nil
}

// bar draws done/total as a text bar of width cells, e.g. [######......] 50%.
func bar(done, total, width int) string {
	full := done * width / max(total, 1)
	return "[" + strings.Repeat("#", full) + strings.Repeat(".", width-full) + "] " + fmt.Sprintf("%3d%%", done*100/max(total, 1))
}
