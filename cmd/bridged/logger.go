package main

import (
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/term"

	"github.com/bridged-app/bridged/internal/config"
)

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

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
		out = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly, NoColor: !isTerminal(w)}
	case "json":
	default:
		if isTerminal(w) {
			out = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
		}
	}
	return zerolog.New(out).Level(lvl).With().Timestamp().Logger()
}
