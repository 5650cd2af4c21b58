package container

// The engine-independent runtime suite: what the rest of the daemon relies
// on from any Runtime, through the interface only. It runs on Docker and
// rootless Podman (the echo agent image) and on the kubernetes engine
// (the fake API and the kubelet's attach code, the in-process echo agent).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/ipc"
)

// suiteEngine is one engine under the suite: its runtime and a spec of the
// echo agent with prompt (the verbs both echo agents know: stderr, sleep,
// exit).
type suiteEngine struct {
	rt   Runtime
	spec func(t *testing.T, prompt string) (Spec, *stderrLines)
	// gone reports whether the engine still has id.
	gone func(t *testing.T, id string) bool
}

func runtimeSuite(t *testing.T, e suiteEngine) {
	t.Run("turn", func(t *testing.T) {
		spec, stderr := e.spec(t, "stderr hello from stderr\nhi")
		run := start(t, e.rt, spec)
		var events []ipc.Event
		for {
			ev, ok := nextEvent(t, run, 30*time.Second)
			if !ok {
				break
			}
			events = append(events, ev)
		}
		if exit := waitExit(t, run, 30*time.Second); exit.Code != 0 || exit.Err != nil {
			t.Errorf("exit %+v; want 0", exit)
		}
		if len(events) != 2 || events[0].Type != ipc.EventSession || events[1].Type != ipc.EventResult || events[1].Text != "echo: "+spec.Input.Prompt {
			t.Errorf("events %+v; want the session, then the whole input echoed (stdin to EOF)", events)
		}
		if !slices.Contains(stderr.all(), "hello from stderr") {
			t.Errorf("stderr %q; want the agent's line", stderr.all())
		}
		if !e.gone(t, run.ID()) {
			t.Errorf("%s is still there after Wait", run.ID())
		}
	})
	t.Run("exit code", func(t *testing.T) {
		spec, _ := e.spec(t, "exit 3")
		run := start(t, e.rt, spec)
		for range run.Events() {
		}
		if exit := waitExit(t, run, 30*time.Second); exit.Code != 3 {
			t.Errorf("exit %+v; want 3", exit)
		}
	})
	t.Run("stop and list", func(t *testing.T) {
		spec, _ := e.spec(t, "sleep 1h")
		run := start(t, e.rt, spec)
		if ev, _ := nextEvent(t, run, 30*time.Second); ev.Type != ipc.EventSession {
			t.Fatalf("first event %+v; want session", ev)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		list, err := e.rt.ListManaged(ctx)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(list, func(c Info) bool { return c.ID == run.ID() })
		if i < 0 || list[i].Group != spec.Group || list[i].Instance != spec.Instance || list[i].Home != spec.Home {
			t.Fatalf("ListManaged %+v; want %s with its group, instance and home", list, run.ID())
		}
		if err := e.rt.Stop(ctx, run.ID(), time.Second); err != nil {
			t.Fatalf("stop: %v", err)
		}
		if !e.gone(t, run.ID()) {
			t.Errorf("%s is still there after Stop", run.ID())
		}
		for range run.Events() {
		}
		waitExit(t, run, 30*time.Second)
		if err := e.rt.Stop(ctx, run.ID(), time.Second); err != nil {
			t.Errorf("stop of a gone container: %v; want nil", err)
		}
	})
	t.Run("leftovers", func(t *testing.T) {
		spec, _ := e.spec(t, "sleep 1h")
		spec.Instance = "an-earlier-instance"
		run := start(t, e.rt, spec)
		if ev, _ := nextEvent(t, run, 30*time.Second); ev.Type != ipc.EventSession {
			t.Fatalf("first event %+v; want session", ev)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		StopLeftovers(ctx, e.rt, suiteHome(t), "this-instance", zerolog.Nop())
		if !e.gone(t, run.ID()) {
			t.Errorf("the leftover %s is still there", run.ID())
		}
	})
}

// suiteRun keeps this process's suite homes apart from another's on the
// same engine.
var suiteRun = func() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}()

// suiteHome is the home directory a subtest's specs belong to (by their
// home label): each has its own, so the leftovers subtest sweeps only its
// own containers.
func suiteHome(t *testing.T) string {
	return "/var/lib/bridged-suite/" + suiteRun + "/" + t.Name()
}

func TestRuntimeSuite(t *testing.T) {
	forEngines(t, func(t *testing.T, e *testEngine) {
		image := ensureEchoImage(t, e.d)
		runtimeSuite(t, suiteEngine{
			rt: e.d,
			spec: func(t *testing.T, prompt string) (Spec, *stderrLines) {
				spec, se := e.echoSpec(t, image, prompt)
				spec.Home = HomeLabel(suiteHome(t))
				return spec, se
			},
			gone: func(t *testing.T, id string) bool {
				list, err := e.d.ListManaged(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				return !slices.ContainsFunc(list, func(c Info) bool { return c.ID == id })
			},
		})
	})
	t.Run(string(EngineKubernetes), func(t *testing.T) {
		t.Parallel()
		k := newKubelet(t)
		e, _ := k.engine(t, nil)
		runtimeSuite(t, suiteEngine{
			rt: e,
			spec: func(t *testing.T, prompt string) (Spec, *stderrLines) {
				spec, se := kubeSpec(uniqueName(t), prompt)
				spec.Home = HomeLabel(suiteHome(t))
				return spec, se
			},
			gone: func(t *testing.T, id string) bool {
				list, err := e.ListManaged(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				return !slices.ContainsFunc(list, func(c Info) bool { return c.ID == id })
			},
		})
	})
}
