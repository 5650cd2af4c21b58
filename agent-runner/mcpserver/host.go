package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/ipc"
)

// ErrTimeout is returned when the host did not answer a request in time.
var ErrTimeout = errors.New("the host did not answer")

// host writes requests into the IPC namespace and hands each response to the
// tool call waiting for it. Responses are noticed through an ipc.Watcher on
// the responses directory, which calls scan.
type host struct {
	layout  ipc.Layout
	timeout time.Duration
	log     zerolog.Logger

	mu        sync.Mutex
	waiters   map[string]chan ipc.Response
	abandoned map[string]bool // timed-out ids: their late responses are deleted
}

func newHost(layout ipc.Layout, timeout time.Duration, log zerolog.Logger) *host {
	return &host{
		layout:    layout,
		timeout:   timeout,
		log:       log,
		waiters:   make(map[string]chan ipc.Response),
		abandoned: make(map[string]bool),
	}
}

// call writes req and waits for its response, at most h.timeout. A response
// with ok:false is returned as a Response, not as an error; errors are about
// the exchange itself (the write failed, the host did not answer, ctx ended).
func (h *host) call(ctx context.Context, req ipc.Request) (ipc.Response, error) {
	ch := make(chan ipc.Response, 1)
	h.mu.Lock()
	h.waiters[req.ID] = ch
	h.mu.Unlock()

	if err := ipc.WriteJSON(h.layout.Requests(), req.FileName(), req); err != nil {
		h.mu.Lock()
		delete(h.waiters, req.ID)
		h.mu.Unlock()
		return ipc.Response{}, fmt.Errorf("write request: %w", err)
	}
	h.log.Debug().Str("request", req.ID).Str("type", string(req.Type)).Msg("request written")

	timer := time.NewTimer(h.timeout)
	defer timer.Stop()
	select {
	case resp := <-ch:
		return resp, nil
	case <-timer.C:
	case <-ctx.Done():
	}

	// Give up, unless the response slipped in while we were deciding.
	h.mu.Lock()
	delete(h.waiters, req.ID)
	select {
	case resp := <-ch:
		h.mu.Unlock()
		return resp, nil
	default:
	}
	h.abandoned[req.ID] = true
	h.mu.Unlock()
	if err := os.Remove(filepath.Join(h.layout.Requests(), req.FileName())); err != nil && !os.IsNotExist(err) {
		h.log.Warn().Err(err).Str("request", req.ID).Msg("remove unanswered request")
	}
	if err := ctx.Err(); err != nil {
		return ipc.Response{}, fmt.Errorf("waiting for the host: %w", err)
	}
	h.log.Warn().Str("request", req.ID).Str("type", string(req.Type)).Dur("timeout", h.timeout).Msg("host did not answer")
	return ipc.Response{}, ErrTimeout
}

// scan looks at the responses directory and delivers every response some
// tool call waits for. Files for other ids are left alone (another process
// may own them), except late answers to requests this server gave up on.
func (h *host) scan(dir string) {
	defer func() {
		if r := recover(); r != nil {
			h.log.Error().Interface("panic", r).Msg("scan responses panicked")
		}
	}()
	names, err := ipc.List(dir)
	if err != nil {
		h.log.Warn().Err(err).Msg("list responses")
		return
	}
	for _, name := range names {
		id, ok := strings.CutSuffix(name, ".json")
		if !ok {
			continue
		}
		h.mu.Lock()
		_, waiting := h.waiters[id]
		late := h.abandoned[id]
		h.mu.Unlock()
		if !waiting && !late {
			continue
		}
		path := filepath.Join(dir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			if !os.IsNotExist(err) {
				h.log.Warn().Err(err).Str("request", id).Msg("read response")
			}
			continue
		}
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			h.log.Warn().Err(err).Str("request", id).Msg("remove response")
		}
		resp, err := ipc.DecodeResponse(data)
		switch {
		case err != nil:
			resp = ipc.Response{ID: id, Error: "the host's answer could not be read: " + cleanErr(err)}
		case resp.ID != id:
			resp = ipc.Response{ID: id, Error: fmt.Sprintf("the host's answer names request %q instead of %q", resp.ID, id)}
		}
		h.mu.Lock()
		if late {
			delete(h.abandoned, id)
			h.mu.Unlock()
			h.log.Info().Str("request", id).Bool("ok", resp.OK).Msg("late response discarded")
			continue
		}
		ch, still := h.waiters[id]
		delete(h.waiters, id)
		h.mu.Unlock()
		if still {
			ch <- resp // buffered, one response per waiter
		}
	}
}

// cleanErr drops the package sentinels' prefixes, which say nothing to the
// agent ("invalid ipc payload: text is empty" → "text is empty").
func cleanErr(err error) string {
	s := err.Error()
	for _, p := range []string{ipc.ErrInvalid.Error() + ": ", "invalid schedule: "} {
		s = strings.ReplaceAll(s, p, "")
	}
	return s
}

// Client writes requests into a group's IPC namespace and waits for the
// host's answers, like the MCP tools do; the runner asks the host through it
// (approvals). Close it when done.
type Client struct {
	h      caller
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewClient watches ipcDir's responses directory; each Call waits at most
// timeout for its answer.
func NewClient(ipcDir string, timeout time.Duration, log zerolog.Logger) (*Client, error) {
	layout := ipc.Layout{Root: ipcDir}
	if err := layout.Ensure(); err != nil {
		return nil, err
	}
	w, err := ipc.NewWatcher(0)
	if err != nil {
		return nil, err
	}
	if err := w.Add(layout.Responses()); err != nil {
		w.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := newHost(layout, timeout, log)
	c := &Client{h: h, cancel: cancel}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if err := w.Run(ctx, h.scan); err != nil {
			log.Warn().Err(err).Msg("response watcher stopped")
		}
	}()
	return c, nil
}

// Call sends req and waits for its response (see caller.call).
func (c *Client) Call(ctx context.Context, req ipc.Request) (ipc.Response, error) {
	return c.h.call(ctx, req)
}

// Close stops watching.
func (c *Client) Close() {
	c.cancel()
	c.wg.Wait()
}
