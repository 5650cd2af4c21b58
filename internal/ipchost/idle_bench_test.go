package ipchost

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
)

// cpuSelf is the CPU time this process used so far.
func cpuSelf(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// idleSweepCPU runs a host over groups registered groups, all idle, with
// the daemon's sweep (every 3 s), and returns the CPU the process used per
// sweep, over five sweeps. live is the host's Config.Live (nil: every group's
// directory is listed each sweep).
func idleSweepCPU(b *testing.B, groups int, live func() []string) time.Duration {
	const tick, sweeps = ipc.DefaultSweep, 5
	e := newEnv(b)
	ctx := context.Background()
	for i := len(e.tasks); i < groups; i++ {
		f := store.Folder(fmt.Sprintf("idle-%04d", i))
		if _, err := e.db.Groups.Add(ctx, store.Group{Chat: chatOf(f), Folder: f, Name: string(f), Trigger: "@Andy", RequiresTrigger: true}); err != nil {
			b.Fatal(err)
		}
	}
	h, err := New(Config{Home: e.home, Timezone: e.loc, AssistantName: "Andy", Sweep: tick, Live: live}, e.db, e.msg, e.waker, e.refresh, zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- h.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	// Started: every group is watched (the first look at each is start-up
	// work, not idle cost).
	deadline := time.Now().Add(5 * time.Minute)
	for {
		keys, running := h.box.Keys()
		if running && len(keys) == groups && h.box.Workers() == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the host did not watch %d groups, all idle, within 5 minutes: %d watched (running %v), %d workers", groups, len(keys), running, h.box.Workers())
		}
		<-time.After(10 * time.Millisecond) // polling the host's own state: there is no event for "all watched"
	}
	cpu0 := cpuSelf(b)
	<-time.After(sweeps * tick) // the measurement itself: idle time
	return (cpuSelf(b) - cpu0) / sweeps
}

// BenchmarkIdleGroups: the CPU an idle daemon's IPC host spends on its
// safety sweep with 10 and with 3,000 registered groups (none with a live
// container), per minute of the default 3 s sweep; and the same 3,000 when
// every sweep lists every group's directory (Config.Live nil, as before).
func BenchmarkIdleGroups(b *testing.B) {
	none := func() []string { return nil }
	perMinute := time.Minute / ipc.DefaultSweep
	for range b.N {
		few := idleSweepCPU(b, 10, none) * perMinute
		many := idleSweepCPU(b, 3000, none) * perMinute
		all := idleSweepCPU(b, 3000, nil) * perMinute
		b.ReportMetric(float64(few)/float64(time.Millisecond), "ms-CPU/min-10-groups")
		b.ReportMetric(float64(many)/float64(time.Millisecond), "ms-CPU/min-3000-groups")
		fmt.Printf("idle IPC sweep, CPU per minute (3 s sweep): 10 groups %.1f ms, 3,000 groups %.1f ms (%.2fx); 3,000 groups listing every directory each sweep %.1f ms (%.1fx)\n",
			ms(few), ms(many), float64(many)/float64(max(few, 1)), ms(all), float64(all)/float64(max(few, 1)))
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
