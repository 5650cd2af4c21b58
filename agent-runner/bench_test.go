package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/ipc"
)

// minRoundTrips is the least number of follow-ups measured, whatever b.N is.
const minRoundTrips = 100

// BenchmarkFollowUp measures the follow-up path: from an input file written
// by the host to the user message read on claude's stdin. The fake claude
// timestamps every stdin line it reads (FAKECLAUDE_STDIN_LOG); both clocks
// are the same machine's. Each round trip waits for the turn's result before
// the next file is written, so turns do not queue.
func BenchmarkFollowUp(b *testing.B) {
	stdinLog := filepath.Join(b.TempDir(), "stdin.log")
	a := startAgent(b, defaultInput("fake:reply ready"), agentOpts{env: []string{"FAKECLAUDE_STDIN_LOG=" + stdinLog}})
	a.nextOf(ipc.EventResult)

	n := max(b.N, minRoundTrips)
	written := make(map[string]int64, n)
	b.ResetTimer()
	for i := range n {
		marker := "bench-" + strconv.Itoa(i)
		written[marker] = time.Now().UnixNano()
		a.writeInput("fake:reply " + marker)
		if ev := a.nextOf(ipc.EventResult); ev.Text != marker {
			b.Fatalf("result %q; want %q", ev.Text, marker)
		}
	}
	b.StopTimer()
	a.close()
	if code := a.wait(); code != 0 {
		b.Fatalf("exit code %d", code)
	}

	read := readStdinLog(b, stdinLog)
	lat := make([]float64, 0, n)
	for marker, t0 := range written {
		t1, ok := read[marker]
		if !ok {
			b.Fatalf("follow-up %s never reached claude's stdin", marker)
		}
		lat = append(lat, float64(t1-t0)/1e6)
	}
	slices.Sort(lat)
	median := lat[len(lat)/2]
	p99 := lat[min(len(lat)-1, len(lat)*99/100)]
	b.ReportMetric(median, "ms-median")
	b.ReportMetric(p99, "ms-p99")
	b.Logf("follow-up latency (input file written → user message on claude's stdin) over %d round trips: median %.2f ms, p99 %.2f ms, max %.2f ms",
		len(lat), median, p99, lat[len(lat)-1])
	fmt.Printf("follow-up latency: n=%d median=%.2fms p99=%.2fms\n", len(lat), median, p99)
}

// readStdinLog maps each benchmark marker to the time the fake read it.
// Lines are "<unix nanos> <type> <first 1000 bytes of text>".
func readStdinLog(b *testing.B, path string) map[string]int64 {
	f, err := os.Open(path)
	if err != nil {
		b.Fatalf("stdin log: %v", err)
	}
	defer f.Close()
	out := make(map[string]int64)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || fields[1] != "user" || fields[2] != "fake:reply" {
			continue
		}
		ts, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		out[fields[3]] = ts
	}
	return out
}

// BenchmarkFollowUpOverChannel measures the follow-up path of the
// kubernetes engine (decision record 42): from the input the host writes
// (home.Home.WriteInput) through its stream over the run's channel to the
// user message read on claude's stdin.
func BenchmarkFollowUpOverChannel(b *testing.B) {
	stdinLog := filepath.Join(b.TempDir(), "stdin.log")
	c := newChannelHost(b, "http://127.0.0.1:1")
	in := defaultInput("fake:reply ready")
	in.ProxyToken = c.token
	a := startAgent(b, in, agentOpts{env: []string{"FAKECLAUDE_STDIN_LOG=" + stdinLog, ipc.EnvAPIAddr + "=" + c.tcp.Addr(), ipc.EnvAPIAuth + "=" + ipc.APIAuthAPIKey}})
	a.nextOf(ipc.EventResult)

	n := max(b.N, minRoundTrips)
	written := make(map[string]int64, n)
	b.ResetTimer()
	for i := range n {
		marker := "bench-" + strconv.Itoa(i)
		written[marker] = time.Now().UnixNano()
		if _, err := c.home.WriteInput("family", "fake:reply "+marker); err != nil {
			b.Fatal(err)
		}
		if ev := a.nextOf(ipc.EventResult); ev.Text != marker {
			b.Fatalf("result %q; want %q", ev.Text, marker)
		}
	}
	b.StopTimer()
	if err := c.home.WriteClose("family"); err != nil {
		b.Fatal(err)
	}
	if code := a.wait(); code != 0 {
		b.Fatalf("exit code %d", code)
	}
	read := readStdinLog(b, stdinLog)
	lat := make([]float64, 0, n)
	for marker, t0 := range written {
		t1, ok := read[marker]
		if !ok {
			b.Fatalf("follow-up %s never reached claude's stdin", marker)
		}
		lat = append(lat, float64(t1-t0)/1e6)
	}
	slices.Sort(lat)
	b.ReportMetric(lat[len(lat)/2], "ms-median")
	b.ReportMetric(lat[min(len(lat)-1, len(lat)*99/100)], "ms-p99")
}
