package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/term"

	"github.com/bridged-app/bridged/internal/config"
	"github.com/bridged-app/bridged/internal/termsafe"
)

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// consoleValue is how a console log line shows a field's value: made safe
// for the terminal, as a field may carry an agent's words (a container's
// stderr at debug level); a duration rounded to what a reader needs
// (took=1.2s), a bool as a word (timed_out=false).
func consoleValue(v any) string {
	if b, ok := v.([]byte); ok {
		// The console writer hands a bool (any value it marshals) over as
		// its JSON bytes.
		return termsafe.Line(string(b))
	}
	if s, ok := v.(string); ok {
		if u, err := strconv.Unquote(s); err == nil {
			s = u // the console writer quotes "435.218µs"
		}
		if d, err := time.ParseDuration(s); err == nil && strings.ContainsAny(s, "hmsµn") {
			return readableDuration(d).String()
		}
	}
	return termsafe.Line(fmt.Sprint(v))
}

// readableDuration rounds d to two or three significant figures: 1.2s,
// 12.3ms, 435µs; a minute and more to the second.
func readableDuration(d time.Duration) time.Duration {
	for _, step := range []struct{ above, round time.Duration }{
		{time.Minute, time.Second}, {10 * time.Second, 100 * time.Millisecond}, {time.Second, 100 * time.Millisecond},
		{10 * time.Millisecond, time.Millisecond}, {time.Millisecond, 100 * time.Microsecond}, {time.Microsecond, time.Microsecond},
	} {
		if d >= step.above || -d >= step.above {
			return d.Round(step.round)
		}
	}
	return d
}

// setDurationFormat makes zerolog write a duration field as Go writes a
// duration ("1.234567891s"; consoleValue rounds it), not as a float of
// milliseconds. It sets zerolog's format, once, where the loggers are
// built.
func setDurationFormat() { zerolog.DurationFieldFormat = zerolog.DurationFormatString }

// newLogger builds the daemon's logger from BRIDGED_LOG_LEVEL and
// BRIDGED_LOG_FORMAT: console lines on a terminal, JSON otherwise (auto).
func newLogger(cfg *config.Config, w io.Writer) zerolog.Logger {
	setDurationFormat()
	lvl, err := zerolog.ParseLevel(cfg.LogLevel)
	if err != nil || cfg.LogLevel == "" {
		lvl = zerolog.InfoLevel
	}
	out := w
	switch cfg.LogFormat {
	case "console":
		out = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly, NoColor: !isTerminal(w), FormatFieldValue: consoleValue}
	case "json":
	default:
		if isTerminal(w) {
			out = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly, FormatFieldValue: consoleValue}
		}
	}
	return zerolog.New(out).Level(lvl).With().Timestamp().Logger()
}
