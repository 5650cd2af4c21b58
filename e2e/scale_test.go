package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/store/storetest"
)

// scaleSide is one daemon of BenchmarkE2EScale: a home over a copy of a
// seeded store, its daemon, and what was measured against it.
type scaleSide struct {
	name   string
	scale  storetest.Scale
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
// empty store of ten groups, both daemons running, alternated round by
// round in one run. The retention is off in both (BenchmarkScalePrune in
// internal/store measures a prune).
func BenchmarkE2EScale(b *testing.B) {
	large := storetest.ScaleFromEnv(b)
	const rounds, posts, chats = 10, 20, 10
	for range b.N {
		sides := []*scaleSide{
			{name: "empty", scale: storetest.Empty},
			{name: fmt.Sprintf("%d messages", large.Messages), scale: large},
		}
		folder, chat := string(storetest.Folder(0)), string(storetest.Chat(0))
		for _, s := range sides {
			s.e = benchEnv(b, "--idle-timeout", "10m")
			s.e.extraEnv = append(s.e.extraEnv, "BRIDGED_RETENTION=0")
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
		for r := range rounds {
			order := sides
			if r%2 == 1 {
				order = []*scaleSide{sides[1], sides[0]}
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
		var warm [2]time.Duration
		var chatMed [2]time.Duration
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
			warm[i], chatMed[i] = percentile(lat, 0.5), percentile(s.chat, 0.5)
			fmt.Printf("scale e2e: %s (%d groups): message → agent (control API → claude stdin), %d messages: median %.2f ms, p95 %.2f ms; chat -m round trip, %d runs: median %.2f ms, p95 %.2f ms; daemon CPU %.2f ms a message\n",
				s.name, s.scale.Groups, len(lat), ms(warm[i]), ms(percentile(lat, 0.95)), len(s.chat), ms(chatMed[i]), ms(percentile(s.chat, 0.95)),
				ms(s.cpu)/float64(s.msgs))
		}
		cpuRatio := float64(sides[1].cpu) / float64(max(sides[0].cpu, 1))
		fmt.Printf("scale e2e: %d messages against empty, %d alternated rounds: message → agent %.2fx, chat -m %.2fx (medians); daemon CPU a message %.2fx\n",
			large.Messages, rounds, ms(warm[1])/ms(warm[0]), ms(chatMed[1])/ms(chatMed[0]), cpuRatio)
		b.ReportMetric(ms(warm[1])/ms(warm[0]), "x-message-to-agent")
		b.ReportMetric(ms(chatMed[1])/ms(chatMed[0]), "x-chat-m")
		for _, s := range slices.Backward(sides) {
			s.d.stop(b)
		}
	}
}
