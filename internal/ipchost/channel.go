package ipchost

// A run's IPC over its authenticated channel (decision record 42). On the
// kubernetes engine the runner reaches the host over the credential
// proxy's TCP channel, each connection opened with the run's token; the
// token names the group, as the directory a request file appears in does,
// and nothing in a request can name another. A request is carried out by
// the same code as a request file (carryOut with the same unit of work,
// the same record of requests carried out, the same approvals) under the
// same per-group bounds: one quick request of a group at a time, in the
// order they arrive, and at most MaxInFlight at once. Follow-up input is
// the group's input directory, streamed to the runner as the host writes
// it and removed once the runner acknowledges it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
)

// Bounds of the channel.
const (
	// keepAnswers is how many answered request ids a run remembers, so an
	// id sent again after a dropped connection gets its first answer.
	keepAnswers = 256
	// maxAckBytes bounds an acknowledgement's body.
	maxAckBytes = 1 << 10
	// heartbeat is how often an idle input stream writes an empty line,
	// so the runner notices a connection that died without a word.
	heartbeat = 30 * time.Second
	// streamWrite bounds one write to the input stream.
	streamWrite = time.Minute
)

// channelLanes are the groups' bounds on the channel. The zero value is
// ready.
type channelLanes struct {
	mu    sync.Mutex
	lanes map[store.Folder]*lane
}

// lane is one group's bounds: its quick requests one at a time (as its
// directory's worker takes its files), and MaxInFlight requests at once.
type lane struct {
	serial sync.Mutex
	slots  chan struct{}
}

func (l *channelLanes) get(folder store.Folder) *lane {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lanes == nil {
		l.lanes = map[store.Folder]*lane{}
	}
	ln := l.lanes[folder]
	if ln == nil {
		ln = &lane{slots: make(chan struct{}, MaxInFlight)}
		l.lanes[folder] = ln
	}
	return ln
}

// Channel serves the IPC of one run of the group with folder over its
// channel (ipc.ChannelRequest, ipc.ChannelInput, ipc.ChannelAck); the
// caller has authenticated the run (the credential proxy's token). Call
// closeFn when the run ends: what it still waits on (an approval) ends.
func (h *Host) Channel(folder string) (handler http.Handler, closeFn func()) {
	ctx, cancel := context.WithCancel(context.Background())
	c := &channelRun{
		h: h, folder: store.Folder(folder), lane: h.lanes.get(store.Folder(folder)), ctx: ctx,
		log:   h.log.With().Str("group", folder).Str("via", "channel").Logger(),
		calls: map[string]*channelCall{}, acked: make(chan struct{}, 1),
	}
	return c, cancel
}

// channelRun is one run's IPC channel.
type channelRun struct {
	h      *Host
	folder store.Folder
	lane   *lane
	ctx    context.Context // ends with the run
	log    zerolog.Logger

	mu       sync.Mutex
	calls    map[string]*channelCall // by request id: in flight, or answered (the last keepAnswers)
	answered []string                // answered ids, oldest first
	stream   context.CancelFunc      // ends the input stream being served
	acked    chan struct{}           // an input was acknowledged: the stream lists again
}

// channelCall is one request id's handling; done is closed once resp is
// its answer.
type channelCall struct {
	done   chan struct{}
	resp   ipc.Response
	status int
}

func (c *channelRun) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == ipc.ChannelRequest && r.Method == http.MethodPost:
		c.request(w, r)
	case r.URL.Path == ipc.ChannelInput && r.Method == http.MethodGet:
		c.input(w, r)
	case r.URL.Path == ipc.ChannelAck && r.Method == http.MethodPost:
		c.ack(w, r)
	default:
		http.Error(w, fmt.Sprintf("bridged IPC: no %s %s (POST %s, GET %s, POST %s)", r.Method, r.URL.Path,
			ipc.ChannelRequest, ipc.ChannelInput, ipc.ChannelAck), http.StatusNotFound)
	}
}

// writeResponse writes resp as the answer to a request.
func writeResponse(w http.ResponseWriter, status int, resp ipc.Response) {
	data, err := json.Marshal(resp)
	if err != nil {
		status, data = http.StatusInternalServerError, []byte(`{"id":"","ok":false,"error":"internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// request reads one request, bounded and decoded as a request file is,
// and answers it: from its first sending when its id was sent before, else
// by carrying it out.
func (c *channelRun) request(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		c.log.Warn().Int64("limit", tooLarge.Limit).Msg("ipc request over its size bound, refused unread")
		writeResponse(w, http.StatusRequestEntityTooLarge, ipc.ErrorResponse("", fmt.Errorf("malformed request: over %d bytes", MaxRequestBytes)))
		return
	}
	if err != nil {
		return // the connection went; the runner sends it again
	}
	req, err := ipc.DecodeRequest(data)
	if err != nil {
		id := req.ID
		if !ipc.ValidID(id) {
			id = ""
		}
		c.log.Warn().Str("request", id).Str("error", short(err.Error(), 300)).Msg("malformed ipc request")
		writeResponse(w, http.StatusBadRequest, ipc.ErrorResponse(id, fmt.Errorf("malformed request: %w", err)))
		return
	}
	call, first := c.join(req.ID)
	if first {
		select {
		case c.lane.slots <- struct{}{}:
		case <-r.Context().Done():
			c.settle(req.ID, call, http.StatusServiceUnavailable, ipc.ErrorResponse(req.ID, errors.New("not carried out: the connection ended while the group was at its bound")))
			return
		}
		go c.carry(call, req)
	}
	select {
	case <-call.done:
		writeResponse(w, call.status, call.resp)
	case <-r.Context().Done():
		// Its handling goes on; the id sent again gets its answer.
	}
}

// join returns the handling of id, and whether it is new (the caller
// carries it out).
func (c *channelRun) join(id string) (*channelCall, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if call := c.calls[id]; call != nil {
		return call, false
	}
	call := &channelCall{done: make(chan struct{})}
	c.calls[id] = call
	return call, true
}

// settle ends call with resp. An answer that may be retried (status 503:
// nothing was done) is forgotten, so the id sent again is carried out;
// the others are kept, the last keepAnswers.
func (c *channelRun) settle(id string, call *channelCall, status int, resp ipc.Response) {
	call.status, call.resp = status, resp
	c.mu.Lock()
	if status == http.StatusServiceUnavailable {
		delete(c.calls, id)
	} else {
		c.answered = append(c.answered, id)
		if len(c.answered) > keepAnswers {
			delete(c.calls, c.answered[0])
			c.answered = c.answered[1:]
		}
	}
	c.mu.Unlock()
	close(call.done)
}

// carry carries out req, as serve does a request file: an approval waits
// for the owner apart, a slow listing too, and every other request waits
// for the group's previous one; a request that changes something is
// answered from its record when it was carried out before, else carried
// out with a unit of work that records it.
func (c *channelRun) carry(call *channelCall, req ipc.Request) {
	defer func() { <-c.lane.slots }()
	log := c.log.With().Str("request", req.ID).Str("type", string(req.Type)).Logger()
	status, resp := http.StatusOK, ipc.Response{}
	defer func() {
		if r := recover(); r != nil {
			log.Error().Interface("panic", r).Bytes("stack", debug.Stack()).Msg("ipc request handling panicked")
			status, resp = http.StatusOK, ipc.ErrorResponse(req.ID, errors.New("internal error while handling the request"))
		}
		c.settle(req.ID, call, status, resp)
	}()
	start := time.Now()
	switch {
	case req.Type == ipc.TypeAskApproval:
		resp = c.h.ask(c.ctx, string(c.folder), req)
	default:
		if !slow(req) {
			c.lane.serial.Lock()
			defer c.lane.serial.Unlock()
		}
		// A request begun is finished within bounds, whatever its
		// connection does.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), requestTimeout)
		defer cancel()
		if changes(req.Type) {
			rec, found, err := c.h.recorded(ctx, log, c.folder, req.ID)
			if err != nil {
				log.Error().Err(err).Msg("look up handled ipc request; the runner sends it again")
				status, resp = http.StatusServiceUnavailable, ipc.ErrorResponse(req.ID, errors.New("not carried out: the host could not read its records; try again"))
				return
			}
			if found {
				resp = rec
				return
			}
		}
		resp = c.h.carryOut(ctx, &unit{folder: c.folder, req: req, record: changes(req.Type)})
	}
	ev := log.Info()
	if !resp.OK {
		ev = log.Warn().Str("error", short(resp.Error, 300))
	}
	ev.Bool("ok", resp.OK).Dur("took", time.Since(start)).Msg("ipc request answered")
}

// input streams the group's follow-up input to the runner until the run
// or the connection ends; a newer stream of the run replaces it. Every
// input still in the group's input directory is sent once per stream, in
// name (written) order, the close last; the stream lists again when the
// host writes input (home.Home.InputChanged) or the runner acknowledges
// one, never on a timer.
func (c *channelRun) input(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()
	c.mu.Lock()
	if c.stream != nil {
		c.stream()
	}
	c.stream = cancel
	c.mu.Unlock()

	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	sent := map[string]bool{}
	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	for {
		wake := c.h.home.InputChanged(string(c.folder))
		items, err := c.pending(sent)
		if err != nil {
			c.log.Error().Err(err).Msg("read the group's input for its channel")
		}
		var line []byte
		for _, it := range items {
			b, _ := json.Marshal(it)
			line = append(append(line, b...), '\n')
		}
		if len(line) == 0 {
			line = []byte("\n") // at once, then each heartbeat: the stream is alive
		}
		_ = rc.SetWriteDeadline(time.Now().Add(streamWrite))
		if _, err := w.Write(line); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		for _, it := range items {
			sent[it.Name] = true
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-c.acked:
		case <-beat.C:
		}
	}
}

// pending returns the group's input this stream has not sent (sent), in
// order, the close last, and forgets in sent what is gone. A file that is
// not an input (the agent may write there on a shared volume) is moved to
// errors/ as the runner does with one.
func (c *channelRun) pending(sent map[string]bool) ([]ipc.ChannelItem, error) {
	in, err := c.h.home.Input(string(c.folder))
	if err != nil {
		return nil, err
	}
	defer in.Close()
	names, _, err := in.List(batchSize)
	if err != nil {
		return nil, err
	}
	there := make(map[string]bool, len(names))
	var items []ipc.ChannelItem
	closing := false
	for _, name := range names {
		there[name] = true
		switch {
		case sent[name]:
		case name == ipc.CloseName:
			closing = true
		default:
			data, err := in.ReadFile(name, MaxRequestBytes)
			var msg ipc.Input
			if err == nil {
				if !strings.HasSuffix(name, ".json") {
					err = errors.New("not a .json file")
				} else {
					msg, err = ipc.DecodeInput(data)
				}
			}
			if err != nil {
				c.log.Warn().Err(err).Str("file", short(name, 160)).Msg("malformed input file; moved to errors")
				c.reject(name)
				continue
			}
			items = append(items, ipc.ChannelItem{Name: name, Text: msg.Text})
		}
	}
	for name := range sent {
		if !there[name] {
			delete(sent, name)
		}
	}
	if closing {
		items = append(items, ipc.ChannelItem{Name: ipc.CloseName})
	}
	return items, nil
}

// reject moves input file name to the group's errors/ (deleted if even
// that fails), so it is not read again.
func (c *channelRun) reject(name string) {
	t, err := c.h.home.IPC(string(c.folder))
	if err == nil {
		err = t.Rename(ipc.InputDir+"/"+name, ErrorsDir+"/input-"+name)
		_ = t.Close()
	}
	if err != nil {
		if in, err := c.h.home.Input(string(c.folder)); err == nil {
			_ = in.Remove(name)
			_ = in.Close()
		}
	}
}

// ack removes the input the runner took from the group's input directory.
func (c *channelRun) ack(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAckBytes))
	var it ipc.ChannelItem
	if err == nil {
		err = json.Unmarshal(data, &it)
	}
	if err == nil && (it.Name == "" || it.Name == "." || it.Name == ".." || strings.ContainsAny(it.Name, "/\\\x00")) {
		err = fmt.Errorf("%q is not an input's name", short(it.Name, 80))
	}
	if err != nil {
		http.Error(w, "bridged IPC: malformed acknowledgement: "+err.Error(), http.StatusBadRequest)
		return
	}
	in, err := c.h.home.Input(string(c.folder))
	if err == nil {
		err = in.Remove(it.Name)
		_ = in.Close()
	}
	if err != nil {
		c.log.Error().Err(err).Str("file", short(it.Name, 160)).Msg("remove acknowledged input")
		http.Error(w, "bridged IPC: acknowledgement not kept: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	select {
	case c.acked <- struct{}{}:
	default:
	}
	w.WriteHeader(http.StatusNoContent)
}
