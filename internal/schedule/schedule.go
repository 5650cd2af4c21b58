// Package schedule parses task schedules and computes their next run.
//
// Three kinds exist (DESIGN §9, §10):
//   - cron: five fields (or a descriptor such as @daily), evaluated in the
//     configured timezone with robfig/cron's parser;
//   - interval: a Go duration of at least one minute, anchored to the
//     schedule (next = anchor + k·interval), not to the end of the last run;
//   - once: a local time in the configured timezone ("2026-11-22 09:30",
//     "2026-11-22T09:30:00") or RFC 3339.
//
// Both the MCP tools (to refuse a bad value before anything is written) and
// the host (to compute next runs) use this package, so they agree.
package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Kind is how a task repeats.
type Kind string

// The schedule kinds.
const (
	Cron     Kind = "cron"
	Interval Kind = "interval"
	Once     Kind = "once"
)

// Valid reports whether k is one of the schedule kinds.
func (k Kind) Valid() bool {
	return k == Cron || k == Interval || k == Once
}

// MinInterval is the shortest interval a task may repeat at.
const MinInterval = time.Minute

// ErrInvalid is wrapped by every parse error.
var ErrInvalid = errors.New("invalid schedule")

// Schedule is a parsed schedule.
type Schedule struct {
	Kind     Kind
	Value    string
	cron     cron.Schedule
	interval time.Duration
	at       time.Time
}

var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

var localLayouts = []string{
	"2006-01-02T15:04:05",
	"2006-01-02T15:04",
	"2006-01-02 15:04:05",
	"2006-01-02 15:04",
}

// Parse checks value for kind; loc is the configured timezone (once values
// without an offset are read in it). The error says exactly what is wrong.
func Parse(kind Kind, value string, loc *time.Location) (Schedule, error) {
	value = strings.TrimSpace(value)
	s := Schedule{Kind: kind, Value: value}
	switch kind {
	case Cron:
		if strings.HasPrefix(value, "CRON_TZ=") || strings.HasPrefix(value, "TZ=") {
			return s, fmt.Errorf("%w: invalid cron expression %q: a timezone prefix is not allowed, times are in the configured timezone", ErrInvalid, value)
		}
		if strings.HasPrefix(value, "@every") {
			return s, fmt.Errorf("%w: invalid cron expression %q: use schedule_type interval for @every", ErrInvalid, value)
		}
		c, err := parser.Parse(value)
		if err != nil {
			return s, fmt.Errorf("%w: invalid cron expression %q: %v", ErrInvalid, value, err)
		}
		if c.Next(time.Now().In(loc)).IsZero() {
			return s, fmt.Errorf("%w: invalid cron expression %q: it never fires", ErrInvalid, value)
		}
		s.cron = c
	case Interval:
		d, err := time.ParseDuration(value)
		if err != nil {
			return s, fmt.Errorf("%w: invalid interval %q: want a Go duration such as 30m or 1h30m", ErrInvalid, value)
		}
		if d < MinInterval {
			return s, fmt.Errorf("%w: invalid interval %q: must be at least %s", ErrInvalid, value, MinInterval)
		}
		s.interval = d
	case Once:
		t, err := parseOnce(value, loc)
		if err != nil {
			return s, err
		}
		s.at = t
	default:
		return s, fmt.Errorf("%w: schedule_type must be cron, interval or once, not %q", ErrInvalid, kind)
	}
	return s, nil
}

func parseOnce(value string, loc *time.Location) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, value); err == nil {
		return t, nil
	}
	for _, l := range localLayouts {
		if t, err := time.ParseInLocation(l, value, loc); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%w: invalid time %q: want local time like 2026-11-22 09:30 or RFC 3339", ErrInvalid, value)
}

// First returns the first run at or after now.
func (s Schedule) First(now time.Time, loc *time.Location) time.Time {
	switch s.Kind {
	case Cron:
		return s.cron.Next(now.In(loc))
	case Interval:
		return now.Add(s.interval)
	case Once:
		return s.at
	}
	return time.Time{}
}

// Next returns the run after one that was due at due, given the current time
// now. Cron and interval schedules skip every slot already in the past, so a
// task overdue after downtime runs once, not once per missed slot. Interval
// runs stay anchored: due + k·interval. Once schedules have no next run (zero).
func (s Schedule) Next(due, now time.Time, loc *time.Location) time.Time {
	switch s.Kind {
	case Cron:
		from := due
		if now.After(from) {
			from = now
		}
		return s.cron.Next(from.In(loc))
	case Interval:
		next := due.Add(s.interval)
		if !next.After(now) {
			k := now.Sub(due)/s.interval + 1
			next = due.Add(k * s.interval)
		}
		return next
	}
	return time.Time{}
}
