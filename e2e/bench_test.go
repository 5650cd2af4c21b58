package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	containertypes "github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/bridged-app/bridged/internal/channel/telegram/telegramtest"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/testimage"
)

const (
	benchImage = "bridged-agent:bench"
	// stdinLog is where the bench image's fake claude appends a timestamped
	// line for every line it reads on stdin (inside the group's folder).
	stdinLog = "/workspace/group/.fakeclaude-stdin.log"
)

func benchEnv(b *testing.B, args ...string) *env {
	b.Helper()
	if skipReason != "" {
		b.Skip("SKIPPING Docker benchmark: " + skipReason)
	}
	root, err := testimage.FindRepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := testimage.Ensure(ctx, docker, testimage.Options{Tag: benchImage, RepoRoot: root,
		Env: []string{"FAKECLAUDE_STDIN_LOG=" + stdinLog}}); err != nil {
		b.Fatal(err)
	}
	return makeEnv(b, append([]string{"--image", benchImage}, args...))
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s)-1) * p)
	return s[i]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// stdinStamps reads the fake's stdin log: the time each user message with the
// given marker reached claude's stdin.
func stdinStamps(b *testing.B, path string) map[string]time.Time {
	b.Helper()
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	out := make(map[string]time.Time)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.SplitN(sc.Text(), " ", 3)
		if len(fields) < 3 || fields[1] != "user" {
			continue
		}
		ns, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		if i := strings.Index(fields[2], "warm-"); i >= 0 {
			key := fields[2][i:]
			if j := strings.IndexAny(key, " <\n"); j >= 0 {
				key = key[:j]
			}
			out[key] = time.Unix(0, ns)
		}
	}
	return out
}

// BenchmarkE2EWarmLatency: a message posted to the control API → the user
// message on the fake claude's stdin, in a live container, 200 messages.
func BenchmarkE2EWarmLatency(b *testing.B) {
	for range b.N {
		e := benchEnv(b, "--idle-timeout", "10m")
		e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
		d := e.start()
		id := e.post("local:main", "warm up")
		e.waitOut("local:main", id, 1, time.Minute)

		const n = 200
		posted := make(map[string]time.Time, n)
		for i := range n {
			key := fmt.Sprintf("warm-%03d", i)
			posted[key] = time.Now()
			id := e.post("local:main", key)
			e.waitOut("local:main", id, 1, time.Minute)
		}
		stamps := stdinStamps(b, filepath.Join(e.home, "groups", "main", ".fakeclaude-stdin.log"))
		var lat []time.Duration
		for key, t0 := range posted {
			if t1, ok := stamps[key]; ok {
				lat = append(lat, t1.Sub(t0))
			}
		}
		if len(lat) != n {
			b.Fatalf("found %d of %d messages in claude's stdin log", len(lat), n)
		}
		med, p99 := percentile(lat, 0.5), percentile(lat, 0.99)
		b.ReportMetric(ms(med), "ms-median")
		b.ReportMetric(ms(p99), "ms-p99")
		fmt.Printf("warm latency (control API → claude stdin), %d messages: median %.2f ms, p99 %.2f ms\n", n, ms(med), ms(p99))
		d.stop(b)
	}
}

// BenchmarkE2EIngest: messages per second stored through the control API, in
// a group that needs a trigger (so no agent runs).
func BenchmarkE2EIngest(b *testing.B) {
	for range b.N {
		e := benchEnv(b)
		e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
		e.mustCLI("groups", "add", "--tools", "full", "--name", "quiet", "local:quiet")
		d := e.start()
		const n, workers = 2000, 8
		var wg sync.WaitGroup
		start := time.Now()
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < n; i += workers {
					e.post("local:quiet", fmt.Sprintf("chatter %d", i))
				}
			}()
		}
		wg.Wait()
		el := time.Since(start)
		rate := float64(n) / el.Seconds()
		b.ReportMetric(rate, "msgs/s")
		fmt.Printf("ingest through the control API: %d messages in %s, %.0f msgs/s\n", n, el.Round(time.Millisecond), rate)
		d.stop(b)
	}
}

// BenchmarkE2EIdleRSS: the daemon's resident memory with 100 groups
// registered and idle.
func BenchmarkE2EIdleRSS(b *testing.B) {
	for range b.N {
		e := benchEnv(b)
		e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
		for i := range 99 {
			n := fmt.Sprintf("group-%02d", i)
			e.mustCLI("groups", "add", "--tools", "full", "--name", n, "local:"+n)
		}
		if fi, err := os.Stat(bridgedBin); err == nil {
			b.ReportMetric(float64(fi.Size())/(1<<20), "MB-binary")
			fmt.Printf("bridged binary (static, stripped, as make build makes it): %.2f MB\n", float64(fi.Size())/(1<<20))
		}
		d := e.start()
		// Let start-up work settle: one round trip through the API.
		e.mustCLI("groups", "list")
		m := memOf(b, d.cmd.Process.Pid)
		b.ReportMetric(m.rss/1024, "MB-RSS")
		b.ReportMetric(m.anon/1024, "MB-RSS-anon")
		fmt.Printf("daemon RSS with 100 groups registered and idle: %.1f MB (its own memory %.1f MB, the binary's file pages %.1f MB)\n", m.rss/1024, m.anon/1024, m.file/1024)
		// Then as an idle daemon lives: ten sweeps of every group's IPC
		// directory (one each 3 s), with their garbage collected as it comes.
		// The wait is the measurement itself, not a wait for an event.
		const idle = 10 * ipc.DefaultSweep
		cpu0 := cpuTime(b, d.cmd.Process.Pid)
		<-time.After(idle)
		busy := cpuTime(b, d.cmd.Process.Pid) - cpu0
		m = memOf(b, d.cmd.Process.Pid)
		b.ReportMetric(m.rss/1024, "MB-RSS-30s")
		b.ReportMetric(m.anon/1024, "MB-RSS-anon-30s")
		fmt.Printf("daemon RSS with 100 groups registered, after %s idle: %.1f MB (its own memory %.1f MB, the binary's file pages %.1f MB)\n", idle, m.rss/1024, m.anon/1024, m.file/1024)
		pct := 100 * busy.Seconds() / idle.Seconds()
		b.ReportMetric(pct, "%CPU-idle")
		fmt.Printf("daemon CPU time over those %s idle: %s (%.2f %% of one core)\n", idle, busy.Round(time.Millisecond), pct)
		d.stop(b)
	}
}

// BenchmarkE2EChatOnce: `bridged chat -m TEXT main` run as a command against
// a live container, from its start to its exit with the reply printed (it
// ends when the agent's turn ends), 50 round trips.
func BenchmarkE2EChatOnce(b *testing.B) {
	for range b.N {
		e := benchEnv(b, "--idle-timeout", "10m")
		e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
		d := e.start()
		e.mustCLI("chat", "-m", "fake:reply warm", "main")

		const n = 50
		var lat []time.Duration
		for i := range n {
			want := fmt.Sprintf("round-%02d", i)
			t0 := time.Now()
			out := e.mustCLI("chat", "-m", "fake:reply "+want, "main")
			lat = append(lat, time.Since(t0))
			if out != want+"\n" {
				b.Fatalf("chat -m printed %q; want %q", out, want)
			}
		}
		med, p99 := percentile(lat, 0.5), percentile(lat, 0.99)
		b.ReportMetric(ms(med), "ms-median")
		b.ReportMetric(ms(p99), "ms-p99")
		fmt.Printf("chat -m round trip (command start → reply printed and exit), live container, %d runs: median %.2f ms, p99 %.2f ms\n", n, ms(med), ms(p99))
		d.stop(b)
	}
}

// mem is a process's resident memory in KB: all of it, and the part that
// is its own (heap, stacks, SQLite's pages) apart from the binary's file
// pages, which the kernel maps in whole as the daemon runs and which grow
// with the binary's size.
type mem struct{ rss, anon, file float64 }

func memOf(b *testing.B, pid int) mem {
	b.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	var m mem
	fields := map[string]*float64{"VmRSS:": &m.rss, "RssAnon:": &m.anon, "RssFile:": &m.file}
	for _, l := range strings.Split(string(status), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || fields[f[0]] == nil {
			continue
		}
		kb, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			b.Fatalf("parse %q: %v", l, err)
		}
		*fields[f[0]] = kb
		delete(fields, f[0])
	}
	if len(fields) > 0 {
		b.Fatalf("/proc/%d/status lacks %d of VmRSS, RssAnon, RssFile", pid, len(fields))
	}
	return m
}

// cpuTime reads the user and system CPU time a process has used so far.
func cpuTime(b *testing.B, pid int) time.Duration {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The command name, in parentheses, may hold spaces: count fields after it.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	if len(f) < 13 {
		b.Fatalf("short /proc/%d/stat: %q", pid, data)
	}
	var ticks int64
	for _, v := range f[11:13] { // utime, stime (fields 14 and 15)
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			b.Fatalf("parse /proc/%d/stat: %v", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ is 100 on Linux
}

// BenchmarkE2ETelegramIdle: the idle cost of a connected Telegram channel,
// one long poll (25 s, as Telegram holds it) outstanding at a time against
// a fake Bot API on loopback: the daemon's CPU over a minute with nothing
// to do.
func BenchmarkE2ETelegramIdle(b *testing.B) {
	for range b.N {
		srv := telegramtest.New(b)
		srv.SetLongPoll(25 * time.Second)
		e := benchEnv(b)
		e.extraEnv = append(e.extraEnv, "BRIDGED_TELEGRAM_TOKEN="+telegramtest.Token, "BRIDGED_TELEGRAM_API_URL="+srv.URL)
		e.mustCLI("groups", "add", "--name", "family", "tg:-100200")
		d := e.start()
		if !srv.WaitFor(time.Minute, func() bool { return srv.Polls() > 0 }) {
			b.Fatal("the daemon did not poll within 1m")
		}
		// The wait is the measurement itself, not a wait for an event.
		const idle = time.Minute
		cpu0, polls0 := cpuTime(b, d.cmd.Process.Pid), srv.Polls()
		<-time.After(idle)
		busy := cpuTime(b, d.cmd.Process.Pid) - cpu0
		pct := 100 * busy.Seconds() / idle.Seconds()
		b.ReportMetric(pct, "%CPU-idle-telegram")
		fmt.Printf("daemon CPU time over %s idle with Telegram connected (%d long polls): %s (%.2f %% of one core)\n",
			idle, srv.Polls()-polls0, busy.Round(time.Millisecond), pct)
		d.stop(b)
	}
}

// BenchmarkE2EColdStart: a message to a group with no container running,
// until its reply is out (`bridged chat -m`, which starts the container),
// on Docker and on rootless Podman in one run, the daemon as each is
// deployed (root on Docker; the service's user on Podman), 5 rounds each.
func BenchmarkE2EColdStart(b *testing.B) {
	// docker-user: the daemon a `docker` group member, its agents of
	// their groups' uids, their mounts confirmed from the runner's report
	// (docs/decisions.md, record 44).
	for _, engine := range []string{"docker", "docker-user", "podman"} {
		b.Run(engine, func(b *testing.B) {
			for range b.N {
				var e *env
				args := []string{"--idle-timeout", "1s"}
				if engine == "podman" {
					e = makePodmanEnv(b, args)
				} else if engine == "docker-user" {
					if skipReason != "" || os.Geteuid() != 0 {
						b.Skip("SKIPPING: the daemon as a user of its own needs Docker and a root benchmark process")
					}
					e = makeEnvAs(b, nonRootUID, nonRootUID, args)
				} else {
					if skipReason != "" {
						b.Skip("SKIPPING Docker benchmark: " + skipReason)
					}
					e = makeEnv(b, args)
				}
				e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
				d := e.start()
				const n = 5
				var lat []time.Duration
				for i := range n {
					e.waitNoContainer(b, time.Minute) // the last round's container closed
					want := fmt.Sprintf("cold-%02d", i)
					t0 := time.Now()
					if out := e.mustCLI("chat", "-m", "fake:reply "+want, "main"); out != want+"\n" {
						b.Fatalf("chat -m printed %q; want %q", out, want)
					}
					lat = append(lat, time.Since(t0))
				}
				med := percentile(lat, 0.5)
				b.ReportMetric(ms(med), "ms-median")
				rounds := make([]string, len(lat))
				for i, l := range lat {
					rounds[i] = fmt.Sprintf("%.0f", ms(l))
				}
				fmt.Printf("cold start on %s (message → reply, a new container each), %d runs: median %.0f ms, slowest %.0f ms (each, in ms: %s)\n", engine, n, ms(med), ms(percentile(lat, 1)), strings.Join(rounds, " "))
				d.stop(b)
			}
		})
	}
}

// waitNoContainer waits until the engine lists no container of the home,
// waiting for each one's removal.
func (e *env) waitNoContainer(b *testing.B, within time.Duration) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		left := e.containers(ctx)
		if len(left) == 0 {
			return
		}
		for _, c := range left {
			w := e.client().ContainerWait(ctx, c.ID, client.ContainerWaitOptions{Condition: containertypes.WaitConditionRemoved})
			select {
			case <-w.Result:
			case <-w.Error: // gone already, or the deadline
			}
		}
		if ctx.Err() != nil {
			b.Fatalf("containers still there after %s: %+v", within, left)
		}
	}
}
