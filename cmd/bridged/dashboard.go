package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/bridged-app/bridged/internal/control"
)

func (a *app) cmdDashboard(ctx context.Context, args []string) error {
	fs := a.newFlagSet("dashboard", "dashboard [flags]")
	_, cfg, err := a.parseClientConfig(fs, args, 0, 0)
	if err != nil {
		return err
	}
	l, err := control.NewClient(cfg.Socket()).DashboardLogin(ctx)
	if errors.Is(err, control.ErrNotRunning) {
		return fmt.Errorf("bridged is not running: the daemon serves the dashboard (start it with bridged run)")
	}
	if err != nil {
		return err
	}
	if l.URL != "" {
		fmt.Fprintf(a.stdout, "Open this link to log in to the dashboard (it works once, until %s):\n\n  %s\n",
			l.Expires.In(cfg.Timezone).Format("15:04:05"), l.URL)
		return nil
	}
	fmt.Fprintf(a.stdout, `The dashboard is served on the control socket only: set BRIDGED_DASHBOARD=127.0.0.1:PORT
and restart bridged to open it in a browser on this machine, or forward the socket, e.g.
  ssh -L 8080:%s THIS-HOST
and open http://127.0.0.1:8080%s
This login link works once, until %s.
`, cfg.Socket(), l.Path, l.Expires.In(cfg.Timezone).Format("15:04:05"))
	return nil
}
