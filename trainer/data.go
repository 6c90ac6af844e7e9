// Package trainer is commprof's reference distributed trainer: real
// data-parallel SGD on 28x28 10-class images (an embedded synthetic set,
// or MNIST and Fashion-MNIST in IDX format) whose communication goes
// through a collectives.Communicator, so that a profiler sees what
// training really sends.
package trainer

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// Pixels is the size of one image.
const (
	Side    = 28
	Pixels  = Side * Side
	Classes = 10
)

// Dataset holds images as float32 in [0, 1], one row of Pixels each.
type Dataset struct {
	Images []float32 // N×Pixels
	Labels []uint8
}

// Len returns the number of images.
func (d *Dataset) Len() int { return len(d.Labels) }

// Image returns image i.
func (d *Dataset) Image(i int) []float32 { return d.Images[i*Pixels : (i+1)*Pixels] }

// Synthetic returns n images of a deterministic, learnable 10-class set:
// each class is a few strokes at class-specific places, drawn with random
// shifts, thickness and noise. It needs no download; seed fixes it.
func Synthetic(n int, seed uint64) *Dataset {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	// Class templates: each class gets three strokes from its own generator.
	type stroke struct{ x0, y0, x1, y1 float64 }
	templates := make([][]stroke, Classes)
	trng := rand.New(rand.NewPCG(42, 7))
	for c := range templates {
		for range 3 {
			templates[c] = append(templates[c], stroke{4 + trng.Float64()*20, 4 + trng.Float64()*20, 4 + trng.Float64()*20, 4 + trng.Float64()*20})
		}
	}
	d := &Dataset{Images: make([]float32, n*Pixels), Labels: make([]uint8, n)}
	for i := range n {
		c := rng.IntN(Classes)
		d.Labels[i] = uint8(c)
		img := d.Image(i)
		dx, dy := rng.Float64()*4-2, rng.Float64()*4-2
		width := 1.0 + rng.Float64()
		for _, s := range templates[c] {
			// Ink falls off linearly with the distance to the segment.
			x0, y0, x1, y1 := s.x0+dx, s.y0+dy, s.x1+dx, s.y1+dy
			ex, ey := x1-x0, y1-y0
			l2 := math.Max(ex*ex+ey*ey, 1e-9)
			for py := max(0, int(math.Min(y0, y1)-width)); py <= min(Side-1, int(math.Max(y0, y1)+width)+1); py++ {
				for px := max(0, int(math.Min(x0, x1)-width)); px <= min(Side-1, int(math.Max(x0, x1)+width)+1); px++ {
					t := math.Min(1, math.Max(0, ((float64(px)-x0)*ex+(float64(py)-y0)*ey)/l2))
					qx, qy := x0+t*ex-float64(px), y0+t*ey-float64(py)
					if d2 := qx*qx + qy*qy; d2 < width*width {
						if v := float32(1 - math.Sqrt(d2)/width); v > img[py*Side+px] {
							img[py*Side+px] = v
						}
					}
				}
			}
		}
		for p := range img {
			img[p] = float32(math.Min(1, math.Max(0, float64(img[p])+rng.NormFloat64()*0.1)))
		}
	}
	return d
}

// LoadIDX reads the MNIST-format train and test sets from dir: the files
// train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte
// and t10k-labels-idx1-ubyte, each raw or gzipped (.gz).
func LoadIDX(dir string) (train, test *Dataset, err error) {
	if train, err = loadPair(dir, "train"); err != nil {
		return nil, nil, err
	}
	if test, err = loadPair(dir, "t10k"); err != nil {
		return nil, nil, err
	}
	return train, test, nil
}

func loadPair(dir, prefix string) (*Dataset, error) {
	imgs, rows, cols, err := readIDX(dir, prefix+"-images-idx3-ubyte", 0x803)
	if err != nil {
		return nil, err
	}
	labels, _, _, err := readIDX(dir, prefix+"-labels-idx1-ubyte", 0x801)
	if err != nil {
		return nil, err
	}
	if rows != Side || cols != Side {
		return nil, fmt.Errorf("%s: images are %dx%d, want %dx%d", filepath.Join(dir, prefix+"-images-idx3-ubyte"), rows, cols, Side, Side)
	}
	n := len(labels)
	if len(imgs) != n*Pixels {
		return nil, fmt.Errorf("%s: %d images but %d labels", dir, len(imgs)/Pixels, n)
	}
	d := &Dataset{Images: make([]float32, len(imgs)), Labels: labels}
	for i, v := range imgs {
		d.Images[i] = float32(v) / 255
	}
	for i, l := range labels {
		if l >= Classes {
			return nil, fmt.Errorf("%s: label %d of image %d is not a class 0-9", dir, l, i)
		}
	}
	return d, nil
}

// readIDX reads one IDX file (name or name.gz) with the given magic.
func readIDX(dir, name string, magic uint32) (data []byte, rows, cols int, err error) {
	path := filepath.Join(dir, name)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		path += ".gz"
		f, err = os.Open(path)
	}
	if err != nil {
		return nil, 0, 0, fmt.Errorf("reading data set: %w (want %s or %s.gz in %s)", err, name, name, dir)
	}
	defer f.Close()
	var r io.Reader = bufio.NewReader(f)
	if filepath.Ext(path) == ".gz" {
		gz, err := gzip.NewReader(r)
		if err != nil {
			return nil, 0, 0, fmt.Errorf("%s: %w", path, err)
		}
		defer gz.Close()
		r = gz
	}
	var hdr [4]uint32
	if err := binary.Read(r, binary.BigEndian, hdr[:1]); err != nil {
		return nil, 0, 0, fmt.Errorf("%s: %w", path, err)
	}
	if hdr[0] != magic {
		return nil, 0, 0, fmt.Errorf("%s: not an IDX file of this kind (magic %#x, want %#x)", path, hdr[0], magic)
	}
	dims := int(magic & 0xff)
	if err := binary.Read(r, binary.BigEndian, hdr[1:1+dims]); err != nil {
		return nil, 0, 0, fmt.Errorf("%s: %w", path, err)
	}
	size := 1
	for _, d := range hdr[1 : 1+dims] {
		if d == 0 || d > 1<<24 {
			return nil, 0, 0, fmt.Errorf("%s: bad dimension %d", path, d)
		}
		size *= int(d)
	}
	if size > 1<<30 {
		return nil, 0, 0, fmt.Errorf("%s: %d bytes of data is more than an image set holds", path, size)
	}
	data = make([]byte, size)
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, 0, 0, fmt.Errorf("%s: truncated: %w", path, err)
	}
	if dims == 3 {
		rows, cols = int(hdr[2]), int(hdr[3])
	}
	return data, rows, cols, nil
}
