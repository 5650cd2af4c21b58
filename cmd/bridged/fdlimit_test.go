package main

import (
	"flag"
	"testing"

	"github.com/bridged-app/bridged/internal/config"
)

// The bound docs/security.md states for the default settings.
func TestFDBoundOfTheDefaults(t *testing.T) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	f := config.Register(fs)
	if err := fs.Parse([]string{"--home", t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir()) // no ./.env
	cfg, err := f.Resolve(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if got := fdBound(cfg); got != 821 {
		t.Errorf("descriptor bound with the defaults = %d; want 821 (256 + 5 × (16 + 1 + 64 + 32))", got)
	}
	cfg.MaxContainers, cfg.ProxyMaxConns, cfg.ProxyMaxInFlight = 10, 100, 10
	if got := fdBound(cfg); got != 256+10*(16+1+100+10) {
		t.Errorf("descriptor bound = %d; want %d", got, 256+10*(16+1+100+10))
	}
}
