package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/ipc"
)

// caller carries a request to the host and waits for its answer: host
// through the IPC directory's files, channel over the run's authenticated
// channel (decision record 42).
type caller interface {
	// call sends req and waits for its response, at most wait(). A
	// response with ok:false is returned as a Response; errors are about
	// the exchange itself (ErrTimeout, ctx ended, nothing delivered).
	call(ctx context.Context, req ipc.Request) (ipc.Response, error)
	wait() time.Duration
}

func (h *host) wait() time.Duration { return h.timeout }

// Retry pauses of the channel after a failed exchange.
const (
	retryFirst = 100 * time.Millisecond
	retryMax   = 2 * time.Second
)

// maxAnswerBytes bounds the host's answer read from the channel.
const maxAnswerBytes = 4 << 20

// channel posts requests to the host over the run's channel: base is the
// runner's loopback forwarder, which opens each connection with the run's
// token, so the host knows the group from the connection, never from the
// request. A request whose exchange failed (the connection dropped, the
// host said to try again) is sent again with its id until the timeout: the
// host carries an id out once and answers every sending of it.
type channel struct {
	base    string
	timeout time.Duration
	client  *http.Client
	log     zerolog.Logger
}

func newChannel(base string, timeout time.Duration, log zerolog.Logger) *channel {
	return &channel{base: strings.TrimSuffix(base, "/"), timeout: timeout, client: &http.Client{}, log: log}
}

func (c *channel) wait() time.Duration { return c.timeout }

func (c *channel) call(ctx context.Context, req ipc.Request) (ipc.Response, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return ipc.Response{}, fmt.Errorf("encode request: %w", err)
	}
	tctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	pause := retryFirst
	for {
		resp, retry, err := c.post(tctx, body, req.ID)
		if err == nil {
			return resp, nil
		}
		if !retry {
			return ipc.Response{}, err
		}
		c.log.Debug().Err(err).Str("request", req.ID).Msg("request not answered; sending it again")
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-tctx.Done():
			t.Stop()
			if err := ctx.Err(); err != nil {
				return ipc.Response{}, fmt.Errorf("waiting for the host: %w", err)
			}
			c.log.Warn().Str("request", req.ID).Str("type", string(req.Type)).Dur("timeout", c.timeout).Msg("host did not answer")
			return ipc.Response{}, ErrTimeout
		}
		pause = min(2*pause, retryMax)
	}
}

// post sends one request body and reads the host's answer; retry says
// whether sending it again may get one.
func (c *channel) post(ctx context.Context, body []byte, id string) (ipc.Response, bool, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+ipc.ChannelRequest, bytes.NewReader(body))
	if err != nil {
		return ipc.Response{}, false, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hresp, err := c.client.Do(hreq)
	if err != nil {
		return ipc.Response{}, true, err
	}
	defer hresp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(hresp.Body, maxAnswerBytes))
	if err != nil {
		return ipc.Response{}, true, err
	}
	switch hresp.StatusCode {
	case http.StatusOK, http.StatusBadRequest, http.StatusRequestEntityTooLarge:
	case http.StatusServiceUnavailable, http.StatusBadGateway:
		return ipc.Response{}, true, fmt.Errorf("the host said %s", hresp.Status)
	default:
		return ipc.Response{}, false, fmt.Errorf("the host answered %s: %s", hresp.Status, strings.TrimSpace(string(data[:min(len(data), 300)])))
	}
	var resp ipc.Response
	if err := json.Unmarshal(data, &resp); err != nil {
		return ipc.Response{ID: id, Error: "the host's answer could not be read: " + err.Error()}, false, nil
	}
	if hresp.StatusCode != http.StatusOK {
		// Refused before it was carried out: malformed or too large.
		resp.ID, resp.OK = id, false
		if resp.Error == "" {
			resp.Error = "the host refused the request: " + hresp.Status
		}
		return resp, false, nil
	}
	if err := resp.Validate(); err != nil {
		return ipc.Response{ID: id, Error: "the host's answer could not be read: " + cleanErr(err)}, false, nil
	}
	if resp.ID != id {
		return ipc.Response{ID: id, Error: fmt.Sprintf("the host's answer names request %q instead of %q", resp.ID, id)}, false, nil
	}
	return resp, false, nil
}

// NewChannelClient is a Client over the run's channel (base, the runner's
// loopback forwarder) in place of the IPC directory; each Call waits at
// most timeout for its answer.
func NewChannelClient(base string, timeout time.Duration, log zerolog.Logger) *Client {
	return &Client{h: newChannel(base, timeout, log), cancel: func() {}}
}

var errNoWay = errors.New("no IPC directory and no IPC channel")
