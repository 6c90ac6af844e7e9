package trace

import "testing"

func TestRankList(t *testing.T) {
	for _, tc := range []struct {
		in   []int32
		want string
	}{
		{[]int32{0, 1, 2, 3}, "0-3"}, {[]int32{0, 1}, "0,1"}, {[]int32{2, 0}, "2,0"}, {[]int32{0, 2, 4, 5, 6, 7}, "0,2,4-7"},
		{[]int32{3, -1, 5}, "3,?,5"}, {[]int32{5}, "5"}, {nil, ""},
	} {
		if got := RankList(tc.in); got != tc.want {
			t.Errorf("RankList(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
