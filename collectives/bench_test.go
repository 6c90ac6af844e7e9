package collectives

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkAllReduce measures allreduce over loopback TCP with every rank a
// goroutine of this process; it reports the nccl-tests bus bandwidth.
func BenchmarkAllReduce(b *testing.B) {
	for _, n := range []int{2, 4} {
		ts := tcpWorld(b, n, TCPConfig{})
		for _, size := range []int{8, 64 << 10, 128 << 10, 1 << 20, 16 << 20} {
			for _, algo := range []Algo{AlgoAuto, AlgoRing, AlgoRecursiveDoubling, AlgoRabenseifner} {
				if algo != AlgoAuto && size < 64<<10 {
					continue
				}
				b.Run(fmt.Sprintf("ranks=%d/bytes=%d/%s", n, size, algo), func(b *testing.B) {
					b.SetBytes(int64(size))
					cfg := Config{Algorithms: map[Op]Algo{OpAllReduce: algo}}
					mustRun(b, ts, cfg, func(c *Comm) error {
						buf := NewBuffer(Float32, size/4)
						for range b.N {
							if err := c.AllReduce(context.Background(), buf, Sum); err != nil {
								return err
							}
						}
						return nil
					})
					sec := b.Elapsed().Seconds() / float64(b.N)
					b.ReportMetric(float64(size)/sec/1e9*2*float64(n-1)/float64(n), "busbw_GB/s")
				})
			}
		}
	}
}
