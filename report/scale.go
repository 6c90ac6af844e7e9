package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/units"
)

// manyRanks is the most ranks a chart draws one bar, lane or heatmap row
// each for. Past it the rank charts draw percentile bands across ranks
// (min, p50, p95, max) with the outlier ranks beside them, and the
// traffic heatmap sums ranks by host, with a drill-down into the busiest
// host pairs' ranks: a page of 4,096 ranks reads without scrolling
// through 4,096 of anything.
const manyRanks = 64

// drillPairs is how many of the busiest host pairs the traffic heatmap
// offers the rank-by-rank view of.
const drillPairs = 3

// outlierRanks are the ranks a banded chart shows on their own: those the
// what-if analysis names as stragglers, then the first of the
// last-arrival ranking, at most five in all, in that order.
func outlierRanks(s *analyze.Summary) []int {
	var out []int
	add := func(r int) {
		if r >= 0 && !slices.Contains(out, r) && len(out) < 5 {
			out = append(out, r)
		}
	}
	for _, r := range s.Stragglers.Named {
		add(r)
	}
	for _, r := range s.Skew.Ranking[:min(len(s.Skew.Ranking), 3)] {
		add(r)
	}
	return out
}

// nearestRank returns the index into a sorted list of n values of its
// q-quantile, nearest-rank (as analyze's distributions).
func nearestRank(q float64, n int) int {
	k := int(math.Ceil(q*float64(n))) - 1
	return min(max(k, 0), n-1)
}

// bandPick is a rank a banded chart shows, and why.
type bandPick struct {
	index int    // into s.Ranks
	label string // "p50\nrank 12", "rank 17\n(straggler)": an axis label of two or three lines
}

// bandRanks picks the ranks whose compute plus exposed communication is
// the smallest, the median, the 95th percentile and the largest, then the
// outlier ranks.
func bandRanks(s *analyze.Summary) []bandPick {
	if len(s.Ranks) == 0 {
		return nil
	}
	type rk struct {
		i     int
		total float64
	}
	var rs []rk
	for i, r := range s.Ranks {
		rs = append(rs, rk{i, float64(r.ComputeNS + r.ExposedNS)})
	}
	slices.SortStableFunc(rs, func(a, b rk) int { return cmp.Compare(a.total, b.total) })
	var out []bandPick
	for _, q := range []struct {
		name string
		q    float64
	}{{"min", 0}, {"p50", 0.5}, {"p95", 0.95}, {"max", 1}} {
		i := rs[nearestRank(q.q, len(rs))].i
		out = append(out, bandPick{i, fmt.Sprintf("%s\nrank %d", q.name, s.Ranks[i].Rank)})
	}
	byRank := map[int]int{}
	for i, r := range s.Ranks {
		byRank[r.Rank] = i
	}
	for _, r := range outlierRanks(s) {
		i, ok := byRank[r]
		if !ok {
			continue
		}
		if k := slices.IndexFunc(out, func(p bandPick) bool { return p.index == i }); k >= 0 {
			out[k].label += "\n" + outlierWhy(s, r) // one bar, both reasons
			continue
		}
		out = append(out, bandPick{i, fmt.Sprintf("rank %d\n(%s)", r, outlierWhy(s, r))})
	}
	return out
}

// shownRanks are the ranks the timeline draws lanes for: every rank up to
// manyRanks (nil: all), past it the banded ranks.
func shownRanks(s *analyze.Summary) map[int]bool {
	if len(s.Ranks) <= manyRanks {
		return nil
	}
	out := map[int]bool{}
	for _, p := range bandRanks(s) {
		out[s.Ranks[p.index].Rank] = true
	}
	return out
}

// rankBandChart is rankChart past manyRanks: the banded ranks, each bar
// that rank's own breakdown.
func rankBandChart(s *analyze.Summary) chartSpec {
	var pick []int
	var x []string
	for _, p := range bandRanks(s) {
		pick = append(pick, p.index)
		x = append(x, p.label)
	}
	b := stackedBar(x, "", rankTimeSeries(s, pick))
	// Every bar names its rank: no label may be dropped for room.
	b.XYAxis.XAxisList[0].AxisLabel = &opts.AxisLabel{Interval: "0"}
	return chartSpec{ID: "chart-ranks", Title: "Where each rank's time goes", Height: 320,
		Note: fmt.Sprintf("%d ranks: the ranks at the minimum, median, 95th percentile and maximum of compute plus exposed communication, then the ranks that stand out; "+
			"each bar is that rank's compute alone, communication hidden behind compute, communication not hidden, and the part of it spent waiting for the last rank", len(s.Ranks)),
		Variants: []chartVariant{variant("time", "ns", "", b)}}
}

// outlierWhy says why a rank is shown on its own.
func outlierWhy(s *analyze.Summary, r int) string {
	if slices.Contains(s.Stragglers.Named, r) {
		return "straggler"
	}
	return "often last"
}

// hostsOf returns the run's hosts in the order of their first rank, and
// each rank's host index (ranks without a row go to a host "?").
func hostsOf(s *analyze.Summary, n int) ([]string, []int) {
	var hosts []string
	idx := map[string]int{}
	of := make([]int, n)
	host := make([]string, n)
	for i := range host {
		host[i] = "?"
	}
	for _, r := range s.Ranks {
		if r.Rank < n && r.Host != "" {
			host[r.Rank] = r.Host
		}
	}
	for r, h := range host {
		i, ok := idx[h]
		if !ok {
			i = len(hosts)
			idx[h] = i
			hosts = append(hosts, h)
		}
		of[r] = i
	}
	return hosts, of
}

// hostMatrixChart is matrixChart past manyRanks: traffic summed by the
// sending and receiving ranks' hosts, for every op and for each, then the
// busiest host pairs' ranks one by one.
// hostGroups returns what a heatmap of n ranks' traffic sums them by:
// their hosts, or past manyRanks hosts groups of consecutive hosts of
// equal size; each rank's group, the hosts and each rank's host, and
// what a group is, in words.
func hostGroups(s *analyze.Summary, n int) (groups []string, gof []int, hosts []string, of []int, what string) {
	hosts, of = hostsOf(s, n)
	groups, gof, what = hosts, of, "host"
	if len(hosts) > manyRanks {
		per := (len(hosts) + manyRanks - 1) / manyRanks
		groups = nil
		for lo := 0; lo < len(hosts); lo += per {
			hi := min(lo+per, len(hosts)) - 1
			groups = append(groups, hosts[lo]+"–"+hosts[hi])
		}
		gof = make([]int, n)
		for r := range n {
			gof[r] = of[r] / per
		}
		what = fmt.Sprintf("group of %d hosts", per)
	}
	return groups, gof, hosts, of, what
}

// sumGroups sums a matrix's cells into k x k by each rank's group, each
// value of field times scale.
func sumGroups(m analyze.Matrix, field func(analyze.MatrixCell) int64, gof []int, k int, scale float64) [][]float64 {
	out := make([][]float64, k)
	for i := range out {
		out[i] = make([]float64, k)
	}
	for _, c := range m.Cells {
		if c.Src < len(gof) && c.Dst < len(gof) {
			out[gof[c.Src]][gof[c.Dst]] += float64(field(c)) * scale
		}
	}
	return out
}

// The fields of a matrix cell, for sumGroups.
func cellBytes(c analyze.MatrixCell) int64    { return c.Bytes }
func cellMessages(c analyze.MatrixCell) int64 { return c.Messages }
func cellTimeNS(c analyze.MatrixCell) int64   { return c.TimeNS }
func cellSendNS(c analyze.MatrixCell) int64   { return c.SendNS }

func hostMatrixChart(s *analyze.Summary) chartSpec {
	n := s.Matrix.Ranks
	groups, gof, hosts, of, what := hostGroups(s, n)
	c := chartSpec{ID: "chart-matrix", Title: "Traffic between hosts", Height: 420,
		Note: fmt.Sprintf("%d ranks on %d hosts: received messages summed by the sender's %s (rows) and the receiver's (columns); choose the measure and the op, or the busiest host pairs' ranks", n, len(hosts), what)}
	add := func(m analyze.Matrix) {
		sum := func(field func(analyze.MatrixCell) int64) [][]float64 {
			return sumGroups(m, field, gof, len(groups), 1)
		}
		name := "every op"
		if m.Op != "" {
			name = m.Op
		}
		bytes, sendNS := sum(cellBytes), sum(cellSendNS)
		bw := make([][]float64, len(bytes))
		for i := range bytes {
			bw[i] = make([]float64, len(bytes[i]))
			for j := range bytes[i] {
				if sendNS[i][j] > 0 {
					bw[i][j] = bytes[i][j] / sendNS[i][j]
				}
			}
		}
		c.Variants = append(c.Variants,
			labelledMatrix("bytes by host, "+name, "bytes", groups, groups, bytes),
			labelledMatrix("messages by host, "+name, "count", groups, groups, sum(cellMessages)),
			labelledMatrix("recv time by host, "+name, "ns", groups, groups, sum(cellTimeNS)),
			labelledMatrix("bandwidth (bytes / send time) by host, "+name, "gbps", groups, groups, bw))
	}
	add(s.Matrix)
	for _, m := range s.OpMatrices {
		add(m)
	}
	// The drill-down: the busiest pairs of distinct hosts, rank by rank.
	type pair struct {
		a, b  int
		bytes float64
	}
	var pairs []pair
	for a, row := range sumGroups(s.Matrix, cellBytes, of, len(hosts), 1) {
		for b, v := range row {
			if a != b && v > 0 {
				pairs = append(pairs, pair{a, b, v})
			}
		}
	}
	slices.SortStableFunc(pairs, func(x, y pair) int { return cmp.Compare(y.bytes, x.bytes) })
	for _, p := range pairs[:min(len(pairs), drillPairs)] {
		var src, dst []int
		for r := range n {
			if of[r] == p.a {
				src = append(src, r)
			}
			if of[r] == p.b {
				dst = append(dst, r)
			}
		}
		m := make([][]float64, len(src))
		row, col := map[int]int{}, map[int]int{}
		for i, r := range src {
			m[i] = make([]float64, len(dst))
			row[r] = i
		}
		for j, d := range dst {
			col[d] = j
		}
		for _, c := range s.Matrix.Cells {
			i, ok := row[c.Src]
			j, ok2 := col[c.Dst]
			if ok && ok2 {
				m[i][j] = float64(c.Bytes)
			}
		}
		c.Variants = append(c.Variants, labelledMatrix(fmt.Sprintf("bytes, ranks of %s → %s", hosts[p.a], hosts[p.b]), "bytes",
			rankNames(src), rankNames(dst), m))
	}
	return c
}

func rankNames(rs []int) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = "rank " + strconv.Itoa(r)
	}
	return out
}

// labelledMatrix draws m[row][col] with named rows (senders) and columns
// (receivers), leaving out the cells with no value (no traffic).
func labelledMatrix(label, format string, rows, cols []string, m [][]float64) chartVariant {
	var cells []opts.HeatMapData
	var maxV float64
	for i := range m {
		for j, v := range m[i] {
			if v == 0 {
				continue
			}
			cells = append(cells, opts.HeatMapData{Value: [3]interface{}{j, i, round(v)}})
			maxV = math.Max(maxV, v)
		}
	}
	h := heatmap(cols, rows, "receiver", "sender", cells, maxV, blues)
	return variant(label, format, "namedmatrix", h)
}

// skewBandChart is skewChart past manyRanks: for each sampled call, the
// ranks' arrivals after the first as a band (median, 95th percentile and
// latest), and the outlier ranks' own arrivals as lines.
func skewBandChart(s *analyze.Summary) (chartSpec, bool) {
	ser := s.Skew.Series
	var x []string
	p50, p95, mx := []opts.LineData{}, []opts.LineData{}, []opts.LineData{}
	out := outlierRanks(s)
	own := make([][]opts.LineData, len(out))
	for i, row := range ser.Offset {
		x = append(x, strconv.FormatInt(ser.Seq[i], 10))
		var v []int64
		for _, o := range row {
			if o >= 0 {
				v = append(v, o)
			}
		}
		slices.Sort(v)
		at := func(q float64) opts.LineData {
			if len(v) == 0 {
				return opts.LineData{Value: nil}
			}
			return opts.LineData{Value: v[nearestRank(q, len(v))]}
		}
		p50, p95, mx = append(p50, at(0.5)), append(p95, at(0.95)), append(mx, at(1))
		for k, r := range out {
			d := opts.LineData{Value: nil}
			if r < len(row) && row[r] >= 0 {
				d = opts.LineData{Value: row[r]}
			}
			own[k] = append(own[k], d)
		}
	}
	l := charts.NewLine()
	l.SetGlobalOptions(noAnimation(), tooltipAxis(), legendTop(), grid(),
		charts.WithXAxisOpts(opts.XAxis{Name: "collective (sequence number)", Type: "category"}),
		charts.WithYAxisOpts(opts.YAxis{Type: "value", Name: "after the first arrival"}))
	l.SetXAxis(x)
	band := func(name, color string, d []opts.LineData) {
		l.AddSeries(name, d, charts.WithLineChartOpts(opts.LineChart{Symbol: "none"}),
			charts.WithLineStyleOpts(opts.LineStyle{Color: color, Width: 1.5}), charts.WithItemStyleOpts(opts.ItemStyle{Color: color}))
	}
	band("median rank", "#bab0ac", p50)
	band("95th percentile", "#f28e2b", p95)
	band("latest rank", "#e15759", mx)
	for k, r := range out {
		l.AddSeries(fmt.Sprintf("rank %d (%s)", r, outlierWhy(s, r)), own[k], charts.WithLineChartOpts(opts.LineChart{Symbol: "circle"}),
			charts.WithLineStyleOpts(opts.LineStyle{Type: "dashed", Width: 1}))
	}
	ranks := 0
	if len(ser.Offset) > 0 {
		ranks = len(ser.Offset[0])
	}
	return chartSpec{ID: "chart-skew", Title: "When each rank arrived at each collective", Height: 360,
		Note:     fmt.Sprintf("%d ranks: for each sampled world collective, how long after the first rank the median rank, the 95th percentile and the latest arrived (the first is at 0), and the ranks that stand out, each on its own line", ranks),
		Variants: []chartVariant{variant("arrival", "ns", "", l)}}, true
}

// pageSummary is the summary a page embeds as its JSON: past manyRanks,
// without the rank-by-rank matrices' cells (a cell per pair of ranks
// that talk: hundreds of thousands in a wide run), which stats --format
// json gives.
func pageSummary(s *analyze.Summary) *analyze.Summary {
	if s.Matrix.Ranks <= manyRanks {
		return s
	}
	c := *s
	strip := func(m analyze.Matrix) analyze.Matrix {
		return analyze.Matrix{Op: m.Op, Pattern: m.Pattern, Ranks: m.Ranks, Cells: []analyze.MatrixCell{}}
	}
	c.Matrix = strip(s.Matrix)
	c.OpMatrices = make([]analyze.Matrix, len(s.OpMatrices))
	for i, m := range s.OpMatrices {
		c.OpMatrices[i] = strip(m)
	}
	return &c
}

// tableTopK is the most rows a page's rank and peer tables show past
// manyRanks; the note under each sums the rows left out.
const tableTopK = 50

// tableLimit is how many rows of view by a page shows.
func tableLimit(s *analyze.Summary, by string, limit int) int {
	if (by == "rank" || by == "peer") && len(s.Ranks) > manyRanks {
		return min(limit, tableTopK)
	}
	return limit
}

// truncatedOrder is the column a view too long for the page is sorted by
// before it is cut, where the view's own order would keep arbitrary rows:
// the rank table keeps the latest ranks.
var truncatedOrder = map[string]string{"rank": "late"}

// summedColumns are the columns of each view whose values add up across
// rows: the note under a cut table gives their sums over the rows left
// out.
var summedColumns = map[string][]string{
	"op":   {"calls", "bytes", "total"},
	"rank": {"events", "compute", "comm", "exposed", "overlapped", "wait", "last", "sent", "recv", "msgs sent", "msgs recv"},
	"size": {"messages", "bytes", "time", "wait"},
	"peer": {"bytes", "messages", "recv time"},
}

// restSummed says what the rows of t from index from on add up to, in
// the summed columns, from their sort keys (the raw numbers); "" when t
// has no keys or no such column.
func restSummed(t *Table, by string, from int) string {
	if t.Keys == nil || from >= len(t.Keys) {
		return ""
	}
	var parts []string
	for _, name := range summedColumns[by] {
		col := t.columnIndex(name)
		if col < 0 {
			continue
		}
		var sum float64
		for _, row := range t.Keys[from:] {
			v, err := strconv.ParseFloat(row[col], 64)
			if err != nil {
				return "" // a cell the source cannot give: no sum
			}
			sum += v
		}
		var cell string
		switch t.Columns[col].Unit {
		case "ns":
			cell = units.Duration(sum)
		case "bytes":
			cell = units.Bytes(int64(sum))
		default:
			cell = strconv.FormatFloat(sum, 'f', -1, 64)
		}
		parts = append(parts, name+" "+cell)
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("; the other %d together: %s", len(t.Keys)-from, strings.Join(parts, ", "))
}

// diffHostMatrixChart is diffMatrixChart past manyRanks: bytes per basis
// summed by host (or group of hosts), B minus A where both runs have the
// same ranks on the same hosts, and each run's.
func diffHostMatrixChart(a, b *analyze.Summary, d *analyze.Diff) chartSpec {
	c := chartSpec{ID: "chart-diff-matrix", Title: "Traffic between hosts", Height: 420}
	ga, gofA, _, _, what := hostGroups(a, a.Matrix.Ranks)
	gb, gofB, _, _, _ := hostGroups(b, b.Matrix.Ranks)
	ma := sumGroups(a.Matrix, cellBytes, gofA, len(ga), 1/perStep(a))
	mb := sumGroups(b.Matrix, cellBytes, gofB, len(gb), 1/perStep(b))
	if slices.Equal(ga, gb) && slices.Equal(gofA, gofB) {
		var cells []opts.HeatMapData
		var m float64
		for i := range mb {
			for j := range mb[i] {
				v := mb[i][j] - ma[i][j]
				if v != 0 {
					cells = append(cells, opts.HeatMapData{Value: [3]interface{}{j, i, math.Round(v)}})
				}
				m = math.Max(m, math.Abs(v))
			}
		}
		h := heatmap(ga, ga, "receiver", "sender", cells, m, diverging)
		h.VisualMapList = nil
		h.SetGlobalOptions(charts.WithVisualMapOpts(opts.VisualMap{Calculable: opts.Bool(true), Min: float32(-math.Max(m, 1)), Max: float32(math.Max(m, 1)),
			Orient: "vertical", Right: "0", Top: "center", InRange: &opts.VisualMapInRange{Color: diverging}}))
		c.Note = "bytes per " + d.Basis + " summed by the sender's " + what + " (rows) and the receiver's (columns): B minus A; red where B moves more"
		c.Variants = append(c.Variants, variant("B − A bytes by host", "bytes", "namedmatrix", h))
	} else {
		c.Note = "the runs have different ranks or hosts: each run's bytes per " + d.Basis + ", summed by host"
	}
	c.Variants = append(c.Variants, labelledMatrix("A bytes by host", "bytes", ga, ga, ma), labelledMatrix("B bytes by host", "bytes", gb, gb, mb))
	return c
}
