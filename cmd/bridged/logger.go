package main

import (
	"fmt"
	"io"
	"os"
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
// stderr at debug level).
func consoleValue(v any) string { return termsafe.Line(fmt.Sprint(v)) }

// newLogger builds the daemon's logger from BRIDGED_LOG_LEVEL and
// BRIDGED_LOG_FORMAT: console lines on a terminal, JSON otherwise (auto).
func newLogger(cfg *config.Config, w io.Writer) zerolog.Logger {
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
