package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/store/storetest"
)

// scaleSide is one daemon of BenchmarkE2EScale: a home over a copy of a
// seeded store, its daemon, and what was measured against it.
type scaleSide struct {
	name   string
	scale  storetest.Scale
	keep   string // BRIDGED_RETENTION
	e      *env
	d      *daemon
	posted map[string]time.Time // message → agent: each key's post
	chat   []time.Duration      // chat -m round trips
	cpu    time.Duration        // the daemon's CPU over the measured rounds
	msgs   int                  // messages posted in the measured rounds (chat -m's included)
}

// BenchmarkE2EScale: message → agent (a message posted to the control API
// → the user message on the fake claude's stdin, as BenchmarkE2EWarmLatency
// measures it) and `bridged chat -m` round trips, with the real daemon and a
// live container, over a copy of the seeded store of issue 36 (a million
// messages over a year, 100,000 replies in the main group's chat, a
// thousand groups; BRIDGED_SCALE_MESSAGES makes it smaller) against an
// empty store of ten groups, alternated round by round in one run. A third
// daemon over another copy of the seeded store runs its retention's first
// pass meanwhile, pruning 97 % of it (BRIDGED_RETENTION=11d; the pass
// starts a minute after the daemon, paced as in production): its chat -m
// p95 against the seeded store's without a prune. The retention is off in
// the other two (BenchmarkScalePrune in internal/store measures each
// batch).
func BenchmarkE2EScale(b *testing.B) {
	large := storetest.ScaleFromEnv(b)
	const rounds, posts, chats = 10, 20, 10
	for range b.N {
		sides := []*scaleSide{
			{name: "empty", scale: storetest.Empty, keep: "0"},
			{name: fmt.Sprintf("%d messages", large.Messages), scale: large, keep: "0"},
			{name: fmt.Sprintf("%d messages, pruning 97 %%", large.Messages), scale: large, keep: "11d"},
		}
		folder, chat := string(storetest.Folder(0)), string(storetest.Chat(0))
		for _, s := range sides {
			s.e = benchEnv(b, "--idle-timeout", "10m")
			s.e.extraEnv = append(s.e.extraEnv, "BRIDGED_RETENTION="+s.keep)
			t0 := time.Now()
			storetest.Seeded(b, s.e.home, s.scale)
			fmt.Printf("scale e2e: the %s store copied in %s\n", s.name, time.Since(t0).Round(time.Millisecond))
			s.d = s.e.start()
			s.posted = make(map[string]time.Time)
			// The container started and warm, both ways in.
			id := s.e.post(chat, "warm up")
			s.e.waitOut(chat, id, 1, 2*time.Minute)
			s.e.mustCLI("chat", "-m", "fake:reply warm", folder)
		}
		// While the third daemon's first pass is due, the other two idle:
		// their CPU over that time, ten groups against a thousand (one
		// live container each).
		idle0, idleAt := [2]time.Duration{cpuTime(b, sides[0].d.cmd.Process.Pid), cpuTime(b, sides[1].d.cmd.Process.Pid)}, time.Now()
		pruning := sides[2]
		if !pruning.d.waitLog("pruning a backlog of old rows in batches", 3*time.Minute) {
			b.Fatalf("the retention's first pass did not start within 3m\n%s", tail(pruning.d.logs(), 20))
		}
		idleFor := time.Since(idleAt)
		var idle [2]time.Duration
		for i := range idle {
			idle[i] = (cpuTime(b, sides[i].d.cmd.Process.Pid) - idle0[i]) * time.Minute / idleFor
		}
		fmt.Printf("scale e2e: idle daemon CPU per minute (over %s): %d groups %.0f ms, %d groups %.0f ms (%.2fx)\n",
			idleFor.Round(time.Second), sides[0].scale.Groups, ms(idle[0]), sides[1].scale.Groups, ms(idle[1]), float64(idle[1])/float64(max(idle[0], 1)))
		for r := range rounds {
			order := slices.Clone(sides)
			if r%2 == 1 {
				slices.Reverse(order)
			}
			for _, s := range order {
				cpu0 := cpuTime(b, s.d.cmd.Process.Pid)
				for i := range posts {
					key := fmt.Sprintf("warm-%02d-%02d", r, i)
					s.posted[key] = time.Now()
					id := s.e.post(chat, key)
					s.e.waitOut(chat, id, 1, time.Minute)
				}
				for i := range chats {
					want := fmt.Sprintf("round-%02d-%02d", r, i)
					t0 := time.Now()
					out := s.e.mustCLI("chat", "-m", "fake:reply "+want, folder)
					s.chat = append(s.chat, time.Since(t0))
					if out != want+"\n" {
						b.Fatalf("%s: chat -m printed %q; want %q", s.name, out, want)
					}
				}
				s.cpu += cpuTime(b, s.d.cmd.Process.Pid) - cpu0
				s.msgs += posts + chats
			}
		}
		// The pass must have run through every round.
		pruneRan := !strings.Contains(pruning.d.logs(), "pruned a backlog of old rows")
		var warm, chatMed, chat95 [3]time.Duration
		for i, s := range sides {
			stamps := stdinStamps(b, filepath.Join(s.e.home, "groups", folder, ".fakeclaude-stdin.log"))
			var lat []time.Duration
			for key, t0 := range s.posted {
				if t1, ok := stamps[key]; ok {
					lat = append(lat, t1.Sub(t0))
				}
			}
			if len(lat) != len(s.posted) {
				b.Fatalf("%s: found %d of %d messages in claude's stdin log", s.name, len(lat), len(s.posted))
			}
			warm[i], chatMed[i], chat95[i] = percentile(lat, 0.5), percentile(s.chat, 0.5), percentile(s.chat, 0.95)
			fmt.Printf("scale e2e: %s (%d groups): message → agent (control API → claude stdin), %d messages: median %.2f ms, p95 %.2f ms; chat -m round trip, %d runs: median %.2f ms, p95 %.2f ms; daemon CPU %.2f ms a message\n",
				s.name, s.scale.Groups, len(lat), ms(warm[i]), ms(percentile(lat, 0.95)), len(s.chat), ms(chatMed[i]), ms(chat95[i]),
				ms(s.cpu)/float64(s.msgs))
		}
		cpuRatio := float64(sides[1].cpu) / float64(max(sides[0].cpu, 1))
		fmt.Printf("scale e2e: %d messages against empty, %d alternated rounds: message → agent %.2fx, chat -m %.2fx (medians); daemon CPU a message %.2fx\n",
			large.Messages, rounds, ms(warm[1])/ms(warm[0]), ms(chatMed[1])/ms(chatMed[0]), cpuRatio)
		fmt.Printf("scale e2e: while the retention prunes 97 %% of %d messages (through every round: %v), against the same store without: chat -m p95 %.2fx (%.2f vs %.2f ms), median %.2fx; message → agent median %.2fx\n",
			large.Messages, pruneRan, ms(chat95[2])/ms(chat95[1]), ms(chat95[2]), ms(chat95[1]), ms(chatMed[2])/ms(chatMed[1]), ms(warm[2])/ms(warm[1]))
		if !pruneRan {
			fmt.Println("scale e2e: the prune ended before the last round: its figures are partly without it")
		}
		b.ReportMetric(ms(chat95[2])/ms(chat95[1]), "x-chat-m-p95-pruning")
		b.ReportMetric(ms(warm[1])/ms(warm[0]), "x-message-to-agent")
		b.ReportMetric(ms(chatMed[1])/ms(chatMed[0]), "x-chat-m")
		for _, s := range slices.Backward(sides) {
			s.d.stop(b)
		}
	}
}
