package orchestrator

import (
	"testing"
	"time"
)

func TestOverdue(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := time.Second
	for _, tc := range []struct {
		name   string
		l      Limits
		now    time.Duration // since start
		last   time.Duration // since start
		asking bool
		code   string // "": goes on
	}{
		{"no limits", Limits{}, 100 * time.Hour, 0, false, ""},
		{"within both", Limits{NoOutput: 5 * s, Wall: 10 * s}, 4 * s, 0, false, ""},
		{"quiet for the timeout", Limits{NoOutput: 5 * s}, 5 * s, 0, false, CodeNoOutput},
		{"printed since", Limits{NoOutput: 5 * s}, 9 * s, 5 * s, false, ""},
		{"asking counts as output", Limits{NoOutput: 5 * s}, 60 * s, 0, true, ""},
		{"at the wall", Limits{Wall: 10 * s}, 10 * s, 10 * s, false, CodeTimeout},
		{"the wall, while asking", Limits{Wall: 10 * s}, 11 * s, 0, true, CodeTimeout},
		{"the wall first", Limits{NoOutput: 5 * s, Wall: 10 * s}, 20 * s, 0, false, CodeTimeout},
		{"printing never passes the wall", Limits{NoOutput: 5 * s, Wall: 10 * s}, 10 * s, 10 * s, false, CodeTimeout},
	} {
		end, over := Overdue(tc.l, t0.Add(tc.now), t0, t0.Add(tc.last), tc.asking)
		if over != (tc.code != "") || end.Code != tc.code {
			t.Errorf("%s: %v %+v, want %q", tc.name, over, end, tc.code)
		}
		if over && (end.Kind != Killed || end.Status != 137 || end.Message == "") {
			t.Errorf("%s: the end %+v", tc.name, end)
		}
	}
}

func TestWatchPeriod(t *testing.T) {
	for _, tc := range []struct {
		l    Limits
		want time.Duration
	}{
		{Limits{}, time.Second},
		{Limits{Wall: time.Hour}, time.Second},
		{Limits{NoOutput: 800 * time.Millisecond, Wall: time.Hour}, 100 * time.Millisecond},
		{Limits{NoOutput: time.Millisecond}, 10 * time.Millisecond},
	} {
		if got := watchPeriod(tc.l); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.l, got, tc.want)
		}
	}
}
