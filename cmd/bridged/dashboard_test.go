package main

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/control"
	"github.com/bridged-app/bridged/internal/dashboard"
)

// `bridged dashboard` prints a one-time login link from the running daemon
// (with the socket only, how to reach it); without a daemon it says so.
func TestDashboardCommand(t *testing.T) {
	home := newHome(t)
	if _, _, err := cli(t, context.Background(), nil, "", "dashboard", "--home", home); err == nil || !strings.Contains(err.Error(), "bridged is not running") {
		t.Errorf("without a daemon: %v; want 'bridged is not running'", err)
	}
	admin := &control.Admin{DB: openDB(t, home), AssistantName: "Andy", Timezone: time.UTC}
	srv, err := control.Listen(control.Options{Socket: filepath.Join(home, "bridged.sock"), Admin: admin, Log: zerolog.Nop(),
		Dashboard: func(srv *control.Server) (control.Dashboard, error) {
			return dashboard.New(dashboard.Options{Source: srv, Admin: admin})
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() { cancel(); <-done }()
	out, _, err := cli(t, context.Background(), nil, "", "dashboard", "--home", home)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"BRIDGED_DASHBOARD=127.0.0.1:PORT", "ssh -L", "/login?code=", "works once"} {
		if !strings.Contains(out, want) {
			t.Errorf("bridged dashboard printed %q; want %q in it", out, want)
		}
	}
	if !regexp.MustCompile(`/dashboard/[A-Za-z0-9_-]{22,}/login\?code=`).MatchString(out) {
		t.Errorf("bridged dashboard printed %q; want the link under the dashboard's secret path", out)
	}
}
