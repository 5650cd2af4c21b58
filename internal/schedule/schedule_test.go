package schedule

import (
	"strings"
	"testing"
	"time"
)

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	l, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestParseErrors(t *testing.T) {
	loc := time.UTC
	cases := []struct {
		kind  Kind
		value string
		want  string
	}{
		{Cron, "61 * * * *", "invalid cron expression"},
		{Cron, "* * * *", "expected exactly 5 fields"},
		{Cron, "0 0 30 2 *", "never fires"},
		{Cron, "CRON_TZ=UTC 0 9 * * *", "timezone prefix"},
		{Interval, "5", "Go duration"},
		{Interval, "10s", "at least"},
		{Once, "tomorrow", "invalid time"},
		{"weekly", "x", "schedule_type"},
	}
	for _, tc := range cases {
		_, err := Parse(tc.kind, tc.value, loc)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%s, %q) = %v; want error containing %q", tc.kind, tc.value, err, tc.want)
		}
	}
}

func TestCronAcrossDSTInBerlin(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	s, err := Parse(Cron, "0 9 * * *", berlin)
	if err != nil {
		t.Fatal(err)
	}
	// 2026-03-29 is the spring-forward day in Europe.
	due := time.Date(2026, 3, 28, 9, 0, 0, 0, berlin)
	next := s.Next(due, due, berlin)
	if want := time.Date(2026, 3, 29, 9, 0, 0, 0, berlin); !next.Equal(want) {
		t.Fatalf("got %s; want %s", next, want)
	}
	if got := next.Sub(due); got != 23*time.Hour {
		t.Errorf("the DST day is 23h long: got %s", got)
	}
	if h := next.In(berlin).Hour(); h != 9 {
		t.Errorf("wall-clock hour: got %d; want 9", h)
	}
}

func TestIntervalAnchoredAndCatchUp(t *testing.T) {
	s, err := Parse(Interval, "1h", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	due := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	// The run finished 7 minutes late: the next run stays on the hour.
	if got, want := s.Next(due, due.Add(7*time.Minute), time.UTC), due.Add(time.Hour); !got.Equal(want) {
		t.Errorf("anchored: got %s; want %s", got, want)
	}
	// After five hours of downtime: one next run, in the future, on the anchor grid.
	now := due.Add(5*time.Hour + 10*time.Minute)
	if got, want := s.Next(due, now, time.UTC), due.Add(6*time.Hour); !got.Equal(want) {
		t.Errorf("catch-up: got %s; want %s", got, want)
	}
}

func TestOnceLocalAndRFC3339(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	s, err := Parse(Once, "2026-11-22 09:30", berlin)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.First(time.Now(), berlin), time.Date(2026, 11, 22, 9, 30, 0, 0, berlin); !got.Equal(want) {
		t.Errorf("got %s; want %s", got, want)
	}
	if !s.Next(s.First(time.Now(), berlin), time.Now(), berlin).IsZero() {
		t.Error("a once schedule has no next run")
	}
	if _, err := Parse(Once, "2026-11-22T09:30:00Z", berlin); err != nil {
		t.Error(err)
	}
}

func TestKindValid(t *testing.T) {
	for _, tc := range []struct {
		kind Kind
		want bool
	}{{Cron, true}, {Interval, true}, {Once, true}, {"", false}, {"weekly", false}, {"CRON", false}} {
		if got := tc.kind.Valid(); got != tc.want {
			t.Errorf("Kind(%q).Valid() = %v; want %v", tc.kind, got, tc.want)
		}
	}
}
