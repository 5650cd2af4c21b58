package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	sdaemon "github.com/coreos/go-systemd/v22/daemon"
	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/channel/whatsapp"
	"github.com/bridged-app/bridged/internal/config"
	"github.com/bridged-app/bridged/internal/control"
	"github.com/bridged-app/bridged/internal/router"
	"github.com/bridged-app/bridged/internal/store"
)

// statusEvery is how often the STATUS= line is recomputed; it is sent only
// when it changed.
const statusEvery = 2 * time.Second

// readyTimeout bounds the wait for the parts to answer before READY=1.
const readyTimeout = 2 * time.Minute

// probe is one liveness check of the watchdog: it blocks until the part
// answers or ctx ends.
type probe struct {
	name string
	ping func(ctx context.Context) error
}

// systemd tells systemd how the daemon is doing when it runs as a
// Type=notify service (NOTIFY_SOCKET set; otherwise send is a no-op):
//
//   - READY=1 once the control socket, the router's message loop and the
//     store answer;
//   - STATUS= a line a human reads in `systemctl status` (WhatsApp's state,
//     containers running, queue), sent when it changes;
//   - WATCHDOG=1 every half WATCHDOG_USEC, only while every probe answers
//     within that half: a wedged router or store stops the pings and systemd
//     restarts the daemon (WatchdogSec=);
//   - STOPPING=1 when ctx ends (SIGTERM): the daemon drains. While it drains
//     the pings go on without probes (the router no longer loops); the
//     drain is bounded by the router's shutdown timeout and TimeoutStopSec.
type systemd struct {
	send     func(state string) error
	watchdog time.Duration // WATCHDOG_USEC; 0: no watchdog
	ready    []probe       // all must answer before READY=1
	probes   []probe       // the watchdog's
	status   func() string
	log      zerolog.Logger

	stopped chan struct{}
	wg      sync.WaitGroup
}

// sdSend sends one notification to $NOTIFY_SOCKET; without one it does
// nothing.
func sdSend(state string) error {
	_, err := sdaemon.SdNotify(false, state)
	return err
}

// sdWatchdog is WATCHDOG_USEC when it is meant for this process, else 0.
func sdWatchdog(log zerolog.Logger) time.Duration {
	d, err := sdaemon.SdWatchdogEnabled(false)
	if err != nil {
		log.Warn().Err(err).Msg("WATCHDOG_USEC is not usable; no watchdog pings")
		return 0
	}
	return d
}

// start runs the notifications until stop.
func (s *systemd) start(ctx context.Context) {
	s.stopped = make(chan struct{})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() {
			if p := recover(); p != nil {
				s.log.Error().Any("panic", p).Msg("systemd notifications stopped by a panic")
			}
		}()
		s.run(ctx)
	}()
}

// stop ends the notifications (the daemon is about to exit) and waits.
func (s *systemd) stop() {
	close(s.stopped)
	s.wg.Wait()
}

func (s *systemd) notify(state string) {
	if err := s.send(state); err != nil {
		s.log.Debug().Err(err).Msg("cannot notify systemd")
	}
}

// probeAll runs probes, each within d; it returns the first that fails.
func probeAll(ctx context.Context, probes []probe, d time.Duration) (string, error) {
	for _, p := range probes {
		pctx, cancel := context.WithTimeout(ctx, d)
		err := p.ping(pctx)
		cancel()
		if err != nil {
			return p.name, err
		}
	}
	return "", nil
}

func (s *systemd) run(ctx context.Context) {
	last := ""
	if name, err := probeAll(ctx, s.ready, readyTimeout); err != nil {
		if ctx.Err() == nil {
			s.log.Error().Err(err).Str("part", name).Msg("a part did not answer at start; systemd is not told the daemon is ready")
		}
	} else {
		last = s.status()
		s.log.Info().Msg("bridged ready")
		s.notify("READY=1\nSTATUS=" + last)
	}

	var tick <-chan time.Time
	if s.watchdog > 0 {
		t := time.NewTicker(s.watchdog / 2)
		defer t.Stop()
		tick = t.C
	}
	statusTick := time.NewTicker(statusEvery)
	defer statusTick.Stop()
	failing := ""
	done := ctx.Done()
	draining := false
	for {
		select {
		case <-s.stopped:
			return
		case <-done:
			done, draining = nil, true
			s.notify("STOPPING=1\nSTATUS=stopping: finishing the turns in progress")
		case <-statusTick.C:
			if draining {
				continue
			}
			if st := s.status(); st != last {
				last = st
				s.notify("STATUS=" + st)
			}
		case <-tick:
			if draining {
				s.notify("WATCHDOG=1")
				continue
			}
			name, err := probeAll(ctx, s.probes, s.watchdog/2)
			if err != nil {
				if ctx.Err() != nil {
					continue // stopping: the next tick pings without probes
				}
				if failing != name {
					failing = name
					s.log.Error().Err(err).Str("part", name).
						Msg("a part of the daemon does not answer; the systemd watchdog is not pinged")
				}
				continue
			}
			if failing != "" {
				s.log.Info().Str("part", failing).Msg("the part answers again; pinging the systemd watchdog")
				failing = ""
			}
			s.notify("WATCHDOG=1")
		}
	}
}

// statusLine is the STATUS= line: WhatsApp's state, the containers and
// the queue (failures are for `bridged status`).
func statusLine(wa channel.Status, st router.Status) string {
	var b strings.Builder
	fmt.Fprintf(&b, "WhatsApp %s%s", wa.State, statusHealthNote(wa))
	if wa.Detail != "" && wa.State != channel.StateConnected {
		fmt.Fprintf(&b, " (%s)", oneLine(wa.Detail, 80))
	}
	n := len(st.Containers)
	fmt.Fprintf(&b, "; %d container%s running", n, plural(n))
	if w := len(st.Queue.Waiting); w > 0 {
		fmt.Fprintf(&b, ", %d group%s waiting", w, plural(w))
	}
	return b.String()
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// newSystemd builds the daemon's systemd notifications: ready once the
// control socket, the router and the store answer; the watchdog probes the
// router's loop and the store.
func newSystemd(cfg *config.Config, db *store.DB, rt *router.Router, wa *whatsapp.Client, log zerolog.Logger) *systemd {
	c := control.NewClient(cfg.Socket())
	parts := []probe{{"router", rt.Ping}, {"store", db.Ping}}
	return &systemd{
		send:     sdSend,
		watchdog: sdWatchdog(log),
		ready:    append([]probe{{"control socket", c.Health}}, parts...),
		probes:   parts,
		status:   func() string { return statusLine(wa.Status(), rt.Status()) },
		log:      log.With().Str("component", "systemd").Logger(),
	}
}
