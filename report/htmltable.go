package report

import (
	"cmp"
	"slices"
	"strconv"
)

// collapseAbove is the row count above which a page shows a table's
// first collapsedRows rows and a button for the rest.
const (
	collapseAbove = 15
	collapsedRows = 10
)

// htmlTable is a Table as a page draws it: cells with sort keys, headers
// linked to their definitions, long tables collapsed.
type htmlTable struct {
	Title    string
	Note     string
	Columns  []htmlColumn
	Rows     []htmlRow
	Collapse int // rows shown until the reader asks for all; 0 shows all
}

type htmlColumn struct {
	Name    string
	Numeric bool
	Def     string // anchor of the definition, "" for none
	Tip     string // the definition, for the header's tooltip
	Sorted  string // "desc" or "asc" when the rows are sorted by it
}

type htmlRow struct {
	Class string // better or worse, from a verdict column
	Cells []htmlCell
}

type htmlCell struct {
	Text  string
	Links []Link // drawn in place of Text when set
	Key   string // sort key: the raw number behind a formatted cell
	Class string // num or verdict
	// Def and Tip link the cell (a row's figure) to its definition.
	Def, Tip string
}

// sortBy orders t's rows by column col (its Keys when it has them, as
// numbers), descending or not; ties keep their order.
func (t *Table) sortBy(col int, desc bool) {
	if col < 0 || col >= len(t.Columns) {
		return
	}
	idx := make([]int, len(t.Rows))
	for i := range idx {
		idx[i] = i
	}
	key := func(i int) (float64, string) {
		s := t.Rows[i][col]
		if t.Keys != nil {
			s = t.Keys[i][col]
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, s
		}
		return v, ""
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		va, sa := key(a)
		vb, sb := key(b)
		c := cmp.Or(cmp.Compare(va, vb), cmp.Compare(sa, sb))
		if desc {
			return -c
		}
		return c
	})
	rows := make([][]string, len(idx))
	var keys [][]string
	if t.Keys != nil {
		keys = make([][]string, len(idx))
	}
	var links map[[2]int][]Link
	if t.Links != nil {
		links = map[[2]int][]Link{}
	}
	for i, j := range idx {
		rows[i] = t.Rows[j]
		if keys != nil {
			keys[i] = t.Keys[j]
		}
		for c := range t.Columns {
			if l, ok := t.Links[[2]int{j, c}]; ok {
				links[[2]int{i, c}] = l
			}
		}
	}
	if t.RowDefs != nil {
		defs := make([]string, len(idx))
		for i, j := range idx {
			if j < len(t.RowDefs) {
				defs[i] = t.RowDefs[j]
			}
		}
		t.RowDefs = defs
	}
	t.Rows, t.Keys, t.Links = rows, keys, links
	t.Sorted, t.SortedBy, t.SortedDesc = true, col, desc
}

// columnIndex is the index of the column named name, -1 if none.
func (t *Table) columnIndex(name string) int {
	for i, c := range t.Columns {
		if c.Name == name {
			return i
		}
	}
	return -1
}

// html builds the page's form of t, its headers linked through g.
func (g *glossary) html(t *Table) htmlTable {
	h := htmlTable{Title: t.Title, Note: t.Note}
	verdict, metric := -1, -1
	for i, c := range t.Columns {
		if c.Name == "metric" {
			metric = i
		}
		hc := htmlColumn{Name: c.Header(), Numeric: c.Numeric}
		if slug := t.Defs[c.Name]; slug != "" {
			hc.Def, hc.Tip = g.link(slug), definitions[slug].Text
		}
		if t.Sorted && t.SortedBy == i && len(t.Rows) > 1 {
			hc.Sorted = map[bool]string{true: "desc", false: "asc"}[t.SortedDesc]
		}
		if c.Name == "" {
			verdict = i
		}
		h.Columns = append(h.Columns, hc)
	}
	for r, row := range t.Rows {
		hr := htmlRow{}
		for i, cell := range row {
			hc := htmlCell{Text: cell, Links: t.Links[[2]int{r, i}]}
			if i == metric && r < len(t.RowDefs) && t.RowDefs[r] != "" {
				hc.Def, hc.Tip = g.link(t.RowDefs[r]), definitions[t.RowDefs[r]].Text
			}
			if t.Keys != nil && r < len(t.Keys) && i < len(t.Keys[r]) {
				hc.Key = t.Keys[r][i]
			}
			switch {
			case i < len(t.Columns) && t.Columns[i].Numeric:
				hc.Class = "num"
			case i == verdict:
				hc.Class, hr.Class = "verdict", cell
			}
			hr.Cells = append(hr.Cells, hc)
		}
		h.Rows = append(h.Rows, hr)
	}
	if len(h.Rows) > collapseAbove && !t.Full {
		h.Collapse = collapsedRows
	}
	return h
}
