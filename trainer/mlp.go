package trainer

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

// Model is a network the trainer trains data-parallel. Its parameters and
// gradients are each one flat slice, layer by layer, so that a range of
// layers is one buffer to allreduce.
type Model interface {
	Weights() []float32
	Gradients() []float32
	// Layers is the number of layers with parameters; Range(l) is layer
	// l's (1-based) part of Weights and Gradients.
	Layers() int
	Range(l int) (lo, hi int)
	// Forward returns the class probabilities of batch images (batch×Pixels);
	// train turns dropout on.
	Forward(x []float32, batch int, train bool) []float32
	// Loss is the mean cross-entropy of the last Forward and how many it
	// got right.
	Loss(labels []uint8) (float64, int)
	// Backward computes Gradients for the last Forward, last layer first,
	// calling done(l) as soon as layer l's are complete.
	Backward(labels []uint8, done func(layer int))
	Describe() string
	// ActivationBytes is what the model's buffers for its batch
	// (activations, pre-activations, their gradients) hold, in bytes.
	ActivationBytes() int64
}

// MLP is a multi-layer perceptron with ReLU hidden layers and a softmax
// output. Its parameters (and their gradients) live in one flat slice,
// layer by layer (weights out×in, then biases), so that a contiguous range
// of layers is one buffer to allreduce.
type MLP struct {
	Sizes  []int // input, hidden..., output
	Params []float32
	Grads  []float32
	offs   []int // start of each layer's weights; biases follow
	// activations of the last forward pass, per layer, and scratch
	acts, zs [][]float32
	batch    int
}

// NewMLP makes an MLP with He-initialised weights from seed.
func NewMLP(sizes []int, seed uint64) (*MLP, error) {
	if len(sizes) < 2 || sizes[0] != Pixels || sizes[len(sizes)-1] != Classes {
		return nil, fmt.Errorf("mlp sizes %v: want %d inputs, hidden sizes, %d outputs", sizes, Pixels, Classes)
	}
	m := &MLP{Sizes: sizes}
	n := 0
	for l := 1; l < len(sizes); l++ {
		if sizes[l] < 1 {
			return nil, fmt.Errorf("mlp layer %d has %d units", l, sizes[l])
		}
		m.offs = append(m.offs, n)
		n += sizes[l]*sizes[l-1] + sizes[l]
	}
	m.offs = append(m.offs, n)
	m.Params = make([]float32, n)
	m.Grads = make([]float32, n)
	rng := rand.New(rand.NewPCG(seed, 1))
	for l := 1; l < len(sizes); l++ {
		w, _ := m.layer(m.Params, l)
		std := math.Sqrt(2 / float64(sizes[l-1]))
		for i := range w {
			w[i] = float32(rng.NormFloat64() * std)
		}
	}
	return m, nil
}

// Layers returns the number of weight layers.
func (m *MLP) Layers() int { return len(m.Sizes) - 1 }

// Range returns layer l's (1-based) slice of Params or Grads as [lo, hi).
func (m *MLP) Range(l int) (lo, hi int) { return m.offs[l-1], m.offs[l] }

func (m *MLP) layer(p []float32, l int) (w, b []float32) {
	lo, hi := m.Range(l)
	in, out := m.Sizes[l-1], m.Sizes[l]
	return p[lo : lo+in*out], p[lo+in*out : hi]
}

func general(rows, cols int, data []float32) blas32.General {
	return blas32.General{Rows: rows, Cols: cols, Stride: cols, Data: data}
}

func (m *MLP) ensure(batch int) {
	if m.batch == batch {
		return
	}
	m.batch = batch
	m.acts = make([][]float32, len(m.Sizes))
	m.zs = make([][]float32, len(m.Sizes))
	for l := 1; l < len(m.Sizes); l++ {
		m.zs[l] = make([]float32, batch*m.Sizes[l])
		m.acts[l] = make([]float32, batch*m.Sizes[l])
	}
}

// ActivationBytes implements Model: each layer's pre-activations and
// activations, batch×width float32s each (the input is the caller's).
func (m *MLP) ActivationBytes() int64 {
	var n int64
	for l := 1; l < len(m.zs); l++ {
		n += int64(len(m.zs[l])+len(m.acts[l])) * 4
	}
	return n
}

// Weights implements Model.
func (m *MLP) Weights() []float32 { return m.Params }

// Gradients implements Model.
func (m *MLP) Gradients() []float32 { return m.Grads }

// Describe implements Model.
func (m *MLP) Describe() string {
	s := "mlp"
	for i, n := range m.Sizes {
		if i == 0 {
			s += fmt.Sprintf(" %d", n)
		} else {
			s += fmt.Sprintf("-%d", n)
		}
	}
	return s
}

// Forward computes the output probabilities for batch images x
// (batch×Pixels); the MLP has no dropout, so train changes nothing.
func (m *MLP) Forward(x []float32, batch int, train bool) []float32 {
	m.ensure(batch)
	m.acts[0] = x
	L := m.Layers()
	for l := 1; l <= L; l++ {
		in, out := m.Sizes[l-1], m.Sizes[l]
		w, b := m.layer(m.Params, l)
		z := m.zs[l]
		blas32.Gemm(blas.NoTrans, blas.Trans, 1, general(batch, in, m.acts[l-1]), general(out, in, w), 0, general(batch, out, z))
		a := m.acts[l]
		for i := range batch {
			row, arow := z[i*out:(i+1)*out], a[i*out:(i+1)*out]
			for j := range row {
				row[j] += b[j]
			}
			if l < L {
				for j, v := range row {
					arow[j] = max(v, 0)
				}
			} else {
				softmax(row, arow)
			}
		}
	}
	return m.acts[L]
}

func softmax(z, p []float32) {
	mx := z[0]
	for _, v := range z {
		mx = max(mx, v)
	}
	var sum float64
	for j, v := range z {
		e := math.Exp(float64(v - mx))
		p[j] = float32(e)
		sum += e
	}
	for j := range p {
		p[j] = float32(float64(p[j]) / sum)
	}
}

// Loss returns the mean cross-entropy of the last forward pass against
// labels, and how many it classified right.
func (m *MLP) Loss(labels []uint8) (loss float64, correct int) {
	return crossEntropy(m.acts[m.Layers()][:len(labels)*Classes], labels)
}

func crossEntropy(p []float32, labels []uint8) (loss float64, correct int) {
	for i, y := range labels {
		row := p[i*Classes : (i+1)*Classes]
		loss -= math.Log(math.Max(float64(row[y]), 1e-12))
		best := 0
		for j, v := range row {
			if v > row[best] {
				best = j
			}
		}
		if best == int(y) {
			correct++
		}
	}
	return loss / float64(len(labels)), correct
}

// Backward computes the gradient of the mean cross-entropy of the last
// forward pass into Grads, last layer first, calling done(l) as soon as
// layer l's gradient is complete (so its allreduce can start while the
// layers below are still being computed).
func (m *MLP) Backward(labels []uint8, done func(layer int)) {
	batch := len(labels)
	L := m.Layers()
	// dz of the output layer: (p - onehot) / batch, kept in zs[L].
	dz := m.zs[L]
	copy(dz, m.acts[L])
	for i, y := range labels {
		dz[i*Classes+int(y)] -= 1
	}
	inv := 1 / float32(batch)
	for i := range dz {
		dz[i] *= inv
	}
	for l := L; l >= 1; l-- {
		in, out := m.Sizes[l-1], m.Sizes[l]
		gw, gb := m.layer(m.Grads, l)
		blas32.Gemm(blas.Trans, blas.NoTrans, 1, general(batch, out, dz), general(batch, in, m.acts[l-1]), 0, general(out, in, gw))
		clear(gb)
		for i := range batch {
			for j, v := range dz[i*out : (i+1)*out] {
				gb[j] += v
			}
		}
		if l > 1 {
			// dz of the layer below: (dz · W) ⊙ relu'(z), into zs[l-1].
			w, _ := m.layer(m.Params, l)
			below := m.zs[l-1]
			da := m.acts[l-1] // the activation is no longer needed: reuse it
			blas32.Gemm(blas.NoTrans, blas.NoTrans, 1, general(batch, out, dz), general(out, in, w), 0, general(batch, in, da))
			for i, z := range below {
				if z <= 0 {
					below[i] = 0
				} else {
					below[i] = da[i]
				}
			}
			dz = below
		}
		if done != nil {
			done(l)
		}
	}
}
