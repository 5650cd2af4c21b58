package container

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/ipc"
)

// hungEngine is a unix socket that accepts connections and never answers,
// as a hung Docker engine does. DOCKER_HOST points at it for the test.
func hungEngine(t *testing.T) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "hung.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	t.Setenv("DOCKER_HOST", "unix://"+sock)
	t.Setenv("DOCKER_API_VERSION", "1.44") // no version negotiation request
}

// Every Engine API call has its own deadline: against a hung engine, Start,
// Stop, ListManaged and ImageExists fail within about the call timeout
// (never with the caller's context, which has none) and say why.
func TestHungEngineCallsEnd(t *testing.T) {
	hungEngine(t)
	const callTimeout = 200 * time.Millisecond
	d, err := NewDockerWith(zerolog.Nop(), DockerOptions{CallTimeout: callTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()
	spec := Spec{Name: "bridged-hung-1", Image: "img", Group: "g", User: "1000:1000",
		Input: ipc.RunInput{Prompt: "hi", Group: "g", Chat: "local:g", AssistantName: "Andy", Timezone: "UTC"}}
	calls := map[string]func() error{
		"start": func() error { _, err := d.Start(ctx, spec); return err },
		"stop":  func() error { return d.Stop(ctx, "0123456789ab", time.Second) },
		"list":  func() error { _, err := d.ListManaged(ctx); return err },
		"image": func() error { _, err := d.ImageExists(ctx, "img"); return err },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() { done <- call() }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "did not answer within 200ms") {
					t.Fatalf("error: %v; want the engine's missing answer", err)
				}
			case <-time.After(10 * time.Second): // stop: grace 1s + 2 calls
				t.Fatalf("%s still hangs after 10s with a %s call timeout", name, callTimeout)
			}
		})
	}
}

// A NotStoppedError names the container and keeps the cause.
func TestNotStoppedError(t *testing.T) {
	cause := errors.New("engine gone")
	err := error(&NotStoppedError{ID: "0123456789abcdef", Err: cause})
	var ns *NotStoppedError
	if !errors.As(err, &ns) || ns.ID != "0123456789abcdef" || !errors.Is(err, cause) || !strings.Contains(err.Error(), "0123456789ab ") {
		t.Fatalf("error %q; want the container's short id and the cause", err)
	}
}

// fakeEngine answers create and remove, and hangs the calls named in hang
// (wait, attach, start); the others it answers as the engine does, keeping
// the wait and attach streams open. It records the removals.
type fakeEngine struct {
	mu       sync.Mutex
	removed  int
	stopped  int
	hangStop bool          // stop and remove hang
	cut      chan struct{} // closing it breaks the wait and attach streams
	// podman: the engine says it is rootless Podman 4.3.1 on cgroup v1,
	// and shows every container without resource limits.
	podman bool
	waits  []string // the wait conditions asked
	// refuseAttach, when set, is the reason every attach is refused with
	// 409 Conflict, in the body.
	refuseAttach string
}

func startFakeEngine(t *testing.T, hang string) *fakeEngine {
	t.Helper()
	f := &fakeEngine{cut: make(chan struct{})}
	sock := filepath.Join(t.TempDir(), "engine.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		kind := ""
		for _, k := range []string{"create", "wait", "attach", "start", "stop"} {
			if strings.HasSuffix(p, "/"+k) {
				kind = k
			}
		}
		if r.Method == http.MethodDelete {
			kind = "remove"
		}
		f.mu.Lock()
		hangStop := f.hangStop
		f.mu.Unlock()
		if kind != "" && (kind == hang || hangStop && (kind == "stop" || kind == "remove")) {
			select {
			case <-stop:
			case <-r.Context().Done():
			}
			return
		}
		switch {
		case strings.HasSuffix(p, "/version"):
			w.Header().Set("Content-Type", "application/json")
			if f.podman {
				w.Write([]byte(`{"Version":"4.3.1","ApiVersion":"1.41","Components":[{"Name":"Podman Engine","Version":"4.3.1"}]}`))
			} else {
				w.Write([]byte(`{"Version":"28.0.0","ApiVersion":"1.48","Components":[{"Name":"Engine","Version":"28.0.0"}]}`))
			}
			return
		case strings.HasSuffix(p, "/libpod/info"):
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"host":{"cgroupVersion":"v1","cgroupControllers":[],"security":{"rootless":true},
				"idMappings":{"uidmap":[{"container_id":0,"host_id":999,"size":1},{"container_id":1,"host_id":400000,"size":65536}],
				"gidmap":[{"container_id":0,"host_id":995,"size":1},{"container_id":1,"host_id":400000,"size":65536}]}}}`))
			return
		case strings.HasSuffix(p, "/json") && r.Method == http.MethodGet:
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"Id":"0123456789abcdef0123456789abcdef","State":{"Status":"created"},"HostConfig":{"Memory":0,"NanoCpus":0,"PidsLimit":0}}`))
			return
		}
		if kind == "wait" {
			f.mu.Lock()
			f.waits = append(f.waits, r.URL.Query().Get("condition"))
			f.mu.Unlock()
		}
		switch kind {
		case "create":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(`{"Id":"0123456789abcdef0123456789abcdef","Warnings":[]}`))
		case "remove":
			f.mu.Lock()
			f.removed++
			f.mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		case "wait":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			select {
			case <-stop:
			case <-f.cut: // the response ends without a result
			case <-r.Context().Done():
			}
		case "attach":
			if f.refuseAttach != "" {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusConflict)
				json.NewEncoder(w).Encode(map[string]any{"cause": "no such file or directory", "message": f.refuseAttach, "response": 409})
				return
			}
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			buf.WriteString("HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n")
			buf.Flush()
			go func() {
				select {
				case <-stop:
				case <-f.cut:
				}
				conn.Close()
			}()
		case "start":
			w.WriteHeader(http.StatusNoContent)
		case "stop":
			f.mu.Lock()
			f.stopped++
			f.mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { close(stop); srv.Close() })
	t.Setenv("DOCKER_HOST", "unix://"+sock)
	t.Setenv("DOCKER_API_VERSION", "1.44")
	return f
}

// Start bounds each of its calls, the long-lived wait and attach streams
// included (their establishment): an engine that hangs on any one of them
// fails Start within about the call timeout, and the created container is
// removed.
func TestStartCallDeadlines(t *testing.T) {
	for _, hang := range []string{"wait", "attach", "start"} {
		t.Run(hang, func(t *testing.T) {
			f := startFakeEngine(t, hang)
			d, err := NewDockerWith(zerolog.Nop(), DockerOptions{CallTimeout: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			spec := Spec{Name: "bridged-hung-1", Image: "img", Group: "g", User: "1000:1000",
				Input: ipc.RunInput{Prompt: "hi", Group: "g", Chat: "local:g", AssistantName: "Andy", Timezone: "UTC"}}
			done := make(chan error, 1)
			go func() { _, err := d.Start(context.Background(), spec); done <- err }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "did not answer within 200ms") {
					t.Fatalf("error: %v; want the engine's missing answer", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("Start still hangs after 10s with a 200ms call timeout on %s", hang)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.removed != 1 {
				t.Fatalf("removals: %d; want the created container removed", f.removed)
			}
		})
	}
}

// When the wait and attach streams of a running container break, the
// runtime stops the container before Wait returns: the exit wraps ErrLost.
// When the engine cannot stop it, the exit is a *NotStoppedError naming it.
func TestLostConnectionStopsContainer(t *testing.T) {
	for _, hangStop := range []bool{false, true} {
		t.Run(map[bool]string{false: "stopped", true: "not-stopped"}[hangStop], func(t *testing.T) {
			f := startFakeEngine(t, "")
			d, err := NewDockerWith(zerolog.Nop(), DockerOptions{CallTimeout: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			spec := Spec{Name: "bridged-lost-1", Image: "img", Group: "g", User: "1000:1000",
				Input: ipc.RunInput{Prompt: "hi", Group: "g", Chat: "local:g", AssistantName: "Andy", Timezone: "UTC"}}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			run, err := d.Start(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			f.mu.Lock()
			f.hangStop = hangStop
			f.mu.Unlock()
			close(f.cut)
			for range run.Events() {
			}
			exit, err := run.Wait(ctx)
			if err != nil {
				t.Fatalf("wait: %v", err)
			}
			f.mu.Lock()
			stopped, removed := f.stopped, f.removed
			f.mu.Unlock()
			var ns *NotStoppedError
			switch {
			case !hangStop && (!errors.Is(exit.Err, ErrLost) || errors.As(exit.Err, &ns) || stopped != 1 || removed != 1):
				t.Fatalf("exit %+v, %d stops, %d removals; want ErrLost after the container was stopped and removed", exit, stopped, removed)
			case hangStop && (!errors.As(exit.Err, &ns) || ns.ID != run.ID()):
				t.Fatalf("exit %+v; want a NotStoppedError for %s", exit, run.ID())
			}
		})
	}
}
