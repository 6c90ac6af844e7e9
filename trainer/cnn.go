package trainer

import (
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

// CNN is the network of the batch-size study this trainer reproduces:
// conv 3x3x32 ReLU, conv 3x3x64 ReLU, max-pool 2x2, dropout 0.25, dense 128
// ReLU, dropout 0.5, dense 10 softmax. Convolutions are im2col followed by
// one GEMM over the whole batch; activations are stored position-major,
// channels last.
type CNN struct {
	params, grads []float32
	offs          [5]int
	rng           *rand.Rand // dropout masks; each rank draws its own
	batch         int
	x             []float32
	cols1, z1     []float32 // B·676×9, B·676×32
	cols2, z2     []float32 // B·576×288, B·576×64
	pool          []float32 // B×9216 (12·12 positions × 64 channels)
	argmax        []int32   // for each pooled value, its index in z2
	mask1, d1     []float32 // dropout 0.25 on the pooled values
	z3, mask2, d2 []float32 // dense 128, dropout 0.5
	out           []float32 // B×10 probabilities
	scratch       []float32
	train         bool
}

const (
	c1, c2, hid  = 32, 64, 128
	s1, s2, sp   = 26, 24, 12 // output sides of conv1, conv2, the pool
	k1, k2       = 9, 9 * c1  // im2col widths
	flat         = sp * sp * c2
	drop1, drop2 = 0.25, 0.5
)

var cnnShapes = [4][2]int{{c1, k1}, {c2, k2}, {hid, flat}, {Classes, hid}} // out, in per layer

// NewCNN makes the network with He-initialised weights from seed; stream
// seeds its dropout masks.
func NewCNN(seed, stream uint64) *CNN {
	m := &CNN{rng: rand.New(rand.NewPCG(seed, stream+100))}
	n := 0
	for l, sh := range cnnShapes {
		m.offs[l] = n
		n += sh[0]*sh[1] + sh[0]
	}
	m.offs[4] = n
	m.params, m.grads = make([]float32, n), make([]float32, n)
	rng := rand.New(rand.NewPCG(seed, 2))
	for l, sh := range cnnShapes {
		std := math.Sqrt(2 / float64(sh[1]))
		w := m.params[m.offs[l] : m.offs[l]+sh[0]*sh[1]]
		for i := range w {
			w[i] = float32(rng.NormFloat64() * std)
		}
	}
	return m
}

// Weights implements Model.
func (m *CNN) Weights() []float32 { return m.params }

// Gradients implements Model.
func (m *CNN) Gradients() []float32 { return m.grads }

// Layers implements Model.
func (m *CNN) Layers() int { return 4 }

// Range implements Model.
func (m *CNN) Range(l int) (lo, hi int) { return m.offs[l-1], m.offs[l] }

// Describe implements Model.
func (m *CNN) Describe() string {
	return "cnn conv3x3x32-conv3x3x64-maxpool2-dropout0.25-dense128-dropout0.5-dense10"
}

func (m *CNN) layer(p []float32, l int) (w, b []float32) {
	sh := cnnShapes[l-1]
	lo := m.offs[l-1]
	return p[lo : lo+sh[0]*sh[1]], p[lo+sh[0]*sh[1] : m.offs[l]]
}

// ActivationBytes implements Model.
func (m *CNN) ActivationBytes() int64 {
	n := 0
	for _, b := range [][]float32{m.cols1, m.z1, m.cols2, m.z2, m.pool, m.mask1, m.d1, m.z3, m.mask2, m.d2, m.out, m.scratch} {
		n += len(b)
	}
	return int64(n+len(m.argmax)) * 4
}

func (m *CNN) ensure(b int) {
	if m.batch >= b {
		return
	}
	m.batch = b
	m.cols1, m.z1 = make([]float32, b*s1*s1*k1), make([]float32, b*s1*s1*c1)
	m.cols2, m.z2 = make([]float32, b*s2*s2*k2), make([]float32, b*s2*s2*c2)
	m.pool, m.argmax = make([]float32, b*flat), make([]int32, b*flat)
	m.mask1, m.d1 = make([]float32, b*flat), make([]float32, b*flat)
	m.z3, m.mask2, m.d2 = make([]float32, b*hid), make([]float32, b*hid), make([]float32, b*hid)
	m.out = make([]float32, b*Classes)
	m.scratch = make([]float32, b*s2*s2*k2)
}

// gemm computes c = a·bᵀ (tb) or a·b, a of r×k.
func gemm(ta, tb blas.Transpose, ar, ac int, a []float32, br, bc int, b []float32, cr, cc int, c []float32) {
	blas32.Gemm(ta, tb, 1, general(ar, ac, a), general(br, bc, b), 0, general(cr, cc, c))
}

func addBiasReLU(z []float32, bias []float32, relu bool) {
	n := len(bias)
	for i := 0; i < len(z); i += n {
		row := z[i : i+n]
		for j := range row {
			row[j] += bias[j]
			if relu && row[j] < 0 {
				row[j] = 0
			}
		}
	}
}

func (m *CNN) dropout(x, mask, out []float32, p float64) {
	if !m.train {
		copy(out, x)
		return
	}
	keep := float32(1 / (1 - p))
	for i := range x {
		if m.rng.Float64() < p {
			mask[i] = 0
		} else {
			mask[i] = keep
		}
		out[i] = x[i] * mask[i]
	}
}

// Forward implements Model.
func (m *CNN) Forward(x []float32, b int, train bool) []float32 {
	m.ensure(b)
	m.x, m.train = x, train
	// conv1: im2col of 3x3 patches of the 28x28 image.
	cols1 := m.cols1[:b*s1*s1*k1]
	for n := range b {
		img := x[n*Pixels:]
		for oy := range s1 {
			for ox := range s1 {
				c := cols1[((n*s1+oy)*s1+ox)*k1:]
				for ky := range 3 {
					copy(c[ky*3:ky*3+3], img[(oy+ky)*Side+ox:])
				}
			}
		}
	}
	w1, b1 := m.layer(m.params, 1)
	z1 := m.z1[:b*s1*s1*c1]
	gemm(blas.NoTrans, blas.Trans, b*s1*s1, k1, cols1, c1, k1, w1, b*s1*s1, c1, z1)
	addBiasReLU(z1, b1, true)
	// conv2: im2col of 3x3x32 patches.
	cols2 := m.cols2[:b*s2*s2*k2]
	for n := range b {
		for oy := range s2 {
			for ox := range s2 {
				c := cols2[((n*s2+oy)*s2+ox)*k2:]
				for ky := range 3 {
					for kx := range 3 {
						src := ((n*s1+oy+ky)*s1 + ox + kx) * c1
						copy(c[(ky*3+kx)*c1:(ky*3+kx+1)*c1], z1[src:src+c1])
					}
				}
			}
		}
	}
	w2, b2 := m.layer(m.params, 2)
	z2 := m.z2[:b*s2*s2*c2]
	gemm(blas.NoTrans, blas.Trans, b*s2*s2, k2, cols2, c2, k2, w2, b*s2*s2, c2, z2)
	addBiasReLU(z2, b2, true)
	// max-pool 2x2.
	pool, arg := m.pool[:b*flat], m.argmax[:b*flat]
	for n := range b {
		for py := range sp {
			for px := range sp {
				o := (n*sp*sp + py*sp + px) * c2
				for ch := range c2 {
					best := int32(((n*s2+2*py)*s2+2*px)*c2 + ch)
					for _, d := range [3][2]int{{0, 1}, {1, 0}, {1, 1}} {
						i := int32(((n*s2+2*py+d[0])*s2+2*px+d[1])*c2 + ch)
						if z2[i] > z2[best] {
							best = i
						}
					}
					pool[o+ch], arg[o+ch] = z2[best], best
				}
			}
		}
	}
	d1 := m.d1[:b*flat]
	m.dropout(pool, m.mask1[:b*flat], d1, drop1)
	w3, b3 := m.layer(m.params, 3)
	z3 := m.z3[:b*hid]
	gemm(blas.NoTrans, blas.Trans, b, flat, d1, hid, flat, w3, b, hid, z3)
	addBiasReLU(z3, b3, true)
	d2 := m.d2[:b*hid]
	m.dropout(z3, m.mask2[:b*hid], d2, drop2)
	w4, b4 := m.layer(m.params, 4)
	out := m.out[:b*Classes]
	gemm(blas.NoTrans, blas.Trans, b, hid, d2, Classes, hid, w4, b, Classes, out)
	addBiasReLU(out, b4, false)
	for n := range b {
		softmax(out[n*Classes:(n+1)*Classes], out[n*Classes:(n+1)*Classes])
	}
	return out
}

// Loss implements Model.
func (m *CNN) Loss(labels []uint8) (float64, int) {
	return crossEntropy(m.out[:len(labels)*Classes], labels)
}

func colSums(dz []float32, gb []float32) {
	clear(gb)
	n := len(gb)
	for i := 0; i < len(dz); i += n {
		for j, v := range dz[i : i+n] {
			gb[j] += v
		}
	}
}

// Backward implements Model.
func (m *CNN) Backward(labels []uint8, done func(int)) {
	b := len(labels)
	if done == nil {
		done = func(int) {}
	}
	// dense 10.
	dz4 := make([]float32, b*Classes)
	copy(dz4, m.out[:b*Classes])
	for n, y := range labels {
		dz4[n*Classes+int(y)] -= 1
	}
	for i := range dz4 {
		dz4[i] /= float32(b)
	}
	gw4, gb4 := m.layer(m.grads, 4)
	gemm(blas.Trans, blas.NoTrans, b, Classes, dz4, b, hid, m.d2[:b*hid], Classes, hid, gw4)
	colSums(dz4, gb4)
	done(4)
	// dense 128 (through dropout 0.5 and ReLU).
	w4, _ := m.layer(m.params, 4)
	dz3 := make([]float32, b*hid)
	gemm(blas.NoTrans, blas.NoTrans, b, Classes, dz4, Classes, hid, w4, b, hid, dz3)
	for i := range dz3 {
		if m.train {
			dz3[i] *= m.mask2[i]
		}
		if m.z3[i] <= 0 {
			dz3[i] = 0
		}
	}
	gw3, gb3 := m.layer(m.grads, 3)
	gemm(blas.Trans, blas.NoTrans, b, hid, dz3, b, flat, m.d1[:b*flat], hid, flat, gw3)
	colSums(dz3, gb3)
	done(3)
	// through dropout 0.25 and the pool, into conv2's output.
	w3, _ := m.layer(m.params, 3)
	dpool := m.scratch[:b*flat]
	gemm(blas.NoTrans, blas.NoTrans, b, hid, dz3, hid, flat, w3, b, flat, dpool)
	dz2 := make([]float32, b*s2*s2*c2)
	for i, g := range dpool {
		if m.train {
			g *= m.mask1[i]
		}
		if j := m.argmax[i]; m.z2[j] > 0 {
			dz2[j] += g
		}
	}
	gw2, gb2 := m.layer(m.grads, 2)
	gemm(blas.Trans, blas.NoTrans, b*s2*s2, c2, dz2, b*s2*s2, k2, m.cols2[:b*s2*s2*k2], c2, k2, gw2)
	colSums(dz2, gb2)
	done(2)
	// conv1: col2im of conv2's input gradient.
	w2, _ := m.layer(m.params, 2)
	dcols := m.scratch[:b*s2*s2*k2]
	gemm(blas.NoTrans, blas.NoTrans, b*s2*s2, c2, dz2, c2, k2, w2, b*s2*s2, k2, dcols)
	dz1 := make([]float32, b*s1*s1*c1)
	for n := range b {
		for oy := range s2 {
			for ox := range s2 {
				c := dcols[((n*s2+oy)*s2+ox)*k2:]
				for ky := range 3 {
					for kx := range 3 {
						dst := dz1[((n*s1+oy+ky)*s1+ox+kx)*c1:]
						for ch, v := range c[(ky*3+kx)*c1 : (ky*3+kx+1)*c1] {
							dst[ch] += v
						}
					}
				}
			}
		}
	}
	for i, z := range m.z1[:b*s1*s1*c1] {
		if z <= 0 {
			dz1[i] = 0
		}
	}
	gw1, gb1 := m.layer(m.grads, 1)
	gemm(blas.Trans, blas.NoTrans, b*s1*s1, c1, dz1, b*s1*s1, k1, m.cols1[:b*s1*s1*k1], c1, k1, gw1)
	colSums(dz1, gb1)
	done(1)
}
