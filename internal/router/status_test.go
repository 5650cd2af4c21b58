package router

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/control"
	"github.com/bridged-app/bridged/internal/store"
)

// statusLive serves the router's Status as the control API's live part.
type statusLive struct{ r *Router }

func (l statusLive) Live() control.Live {
	var live control.Live
	for _, c := range l.r.Status().Containers {
		live.Containers = append(live.Containers, control.ContainerStatus{Group: c.Group, Kind: c.Kind, Since: c.Since, Idle: !c.Busy})
	}
	return live
}

// /v1/status and /metrics answer while another writer holds the database and the router
// waits for it with a group's lock held: Status reads no group lock and no
// store write.
func TestStatusAnswersWhileTheStoreIsLocked(t *testing.T) {
	h := newHarness(t, nil)
	h.start()
	h.post(mainChat, "hello")
	run := h.nextRun()
	pollUntil(t, func() bool {
		cs := h.r.Status().Containers
		return len(cs) == 1 && cs[0].ID != ""
	}, "the container in Status")

	// Another process holds the write lock of the same database file.
	other, err := sql.Open("sqlite", "file:"+filepath.Join(h.home, "store", "bridged.db")+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()

	// The agent sends a message: the router takes main's lock and waits
	// for the write lock (up to the store's busy timeout, 10 s).
	sent := make(chan error, 1)
	go func() {
		_, err := h.r.SendMessage(context.Background(), nil, string(mainChat), "while locked", store.OriginTool, "main")
		sent <- err
	}()
	gs := h.r.runs.Known("main")
	pollUntil(t, func() bool {
		if gs.TryLock() {
			gs.Unlock()
			return false
		}
		return true
	}, "main's lock held by the waiting send")

	sock := filepath.Join(t.TempDir(), "c.sock")
	srv, err := control.Listen(control.Options{
		Socket: sock,
		Admin:  &control.Admin{DB: h.db, AssistantName: testName, Timezone: time.UTC},
		Status: statusLive{h.r},
		Log:    testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Run(sctx) }()
	defer func() {
		stop()
		<-served
	}()

	// Well within the busy timeout: a Status that waited for main's lock
	// would answer only once the send gave up.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	client := control.NewClient(sock)
	st, err := client.Status(ctx)
	if err != nil {
		t.Fatalf("/v1/status while the store is locked: %v", err)
	}
	metrics, err := client.Metrics(ctx)
	if err != nil {
		t.Fatalf("/metrics while the store is locked: %v", err)
	}
	if !strings.Contains(metrics, "bridged_containers_running 1") {
		t.Fatalf("/metrics while the store is locked: want one container running in\n%s", metrics)
	}
	select {
	case err := <-sent:
		t.Fatalf("the send finished (%v) before /v1/status answered: the store was not locked throughout", err)
	default:
	}
	if len(st.Containers) != 1 || st.Containers[0].Group != "main" || st.Containers[0].Idle {
		t.Fatalf("/v1/status containers: got %+v; want main's, busy", st.Containers)
	}

	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-sent:
		if err != nil {
			t.Fatalf("send after the lock was released: %v", err)
		}
	case <-time.After(testWait):
		t.Fatal("the send did not finish once the lock was released")
	}
	h.nextSend()
	run.result("hi")
	h.nextSend()
	run.exit(0)
	h.waitIdle("main")
}

// Status follows a run as it changes: started busy, idle and replied after
// a result, busy again when a message is piped in, gone after the exit.
func TestStatusFollowsTheRun(t *testing.T) {
	h := newHarness(t, nil)
	h.start()
	h.post(mainChat, "hello")
	run := h.nextRun()
	only := func(what string, ok func(ContainerStatus) bool) {
		t.Helper()
		pollUntil(t, func() bool {
			cs := h.r.Status().Containers
			return len(cs) == 1 && ok(cs[0])
		}, "%s (status: %+v)", what, h.r.Status().Containers)
	}
	only("started, busy", func(c ContainerStatus) bool {
		return c.Group == "main" && c.Kind == "messages" && c.ID == run.id && c.Busy && !c.Replied
	})
	run.result("hi")
	h.nextSend()
	only("idle, replied", func(c ContainerStatus) bool { return !c.Busy && c.Replied })
	h.post(mainChat, "more")
	only("busy with the piped message", func(c ContainerStatus) bool { return c.Busy && c.Replied })
	names := waitInputs(t, h.inputDir("main"), 1)
	run.result("sure")
	h.nextSend()
	only("idle again", func(c ContainerStatus) bool { return !c.Busy })
	consume(t, h.inputDir("main"), names)
	run.exit(0)
	pollUntil(t, func() bool { return len(h.r.Status().Containers) == 0 }, "no container after the exit")
}
