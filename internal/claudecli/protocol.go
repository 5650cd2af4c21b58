package claudecli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// ControlError is the CLI's error answer to a control request.
type ControlError struct {
	Subtype ControlSubtype
	Message string
	Code    string
}

func (e *ControlError) Error() string {
	return fmt.Sprintf("claude refused %s: %s", e.Subtype, e.Message)
}

func newRequestID(n int) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("req_%d_%s", n, hex.EncodeToString(b[:]))
}

func (p *Process) sendRequest(subtype ControlSubtype, body any) (chan ControlResponse, error) {
	p.mu.Lock()
	p.seq++
	id := newRequestID(p.seq)
	ch := make(chan ControlResponse, 1)
	p.pending[id] = ch
	p.mu.Unlock()
	if err := p.writeLine(controlRequestLine{RequestID: id, Type: string(TypeControlRequest), Request: body}); err != nil {
		p.mu.Lock()
		delete(p.pending, id)
		p.mu.Unlock()
		return nil, fmt.Errorf("send %s: %w", subtype, err)
	}
	return ch, nil
}

func (p *Process) awaitResponse(ctx context.Context, subtype ControlSubtype, ch chan ControlResponse) (json.RawMessage, error) {
	result := func(r ControlResponse) (json.RawMessage, error) {
		if r.Subtype != "success" {
			return nil, &ControlError{Subtype: subtype, Message: r.Error, Code: r.ErrorCode}
		}
		return r.Response, nil
	}
	select {
	case r := <-ch:
		return result(r)
	case <-p.done:
		// A response may have raced the exit.
		select {
		case r := <-ch:
			return result(r)
		default:
		}
		return nil, fmt.Errorf("%s: %w", subtype, ErrExited)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *Process) awaitInit(ch chan ControlResponse, sendErr error) {
	defer p.wg.Done()
	defer close(p.initDone)
	if sendErr != nil {
		p.initErr = sendErr
		return
	}
	p.initResp, p.initErr = p.awaitResponse(context.Background(), ControlInitialize, ch)
	if p.initErr != nil {
		p.log.Debug().Err(p.initErr).Msg("claude initialize failed")
		return
	}
	var info struct {
		PID     int    `json:"pid"`
		Version string `json:"claude_code_version"`
		Hooks   bool   `json:"hooks_applied"`
	}
	_ = json.Unmarshal(p.initResp, &info)
	p.log.Debug().Str("version", info.Version).Bool("hooks_applied", info.Hooks).Msg("claude initialized")
}

func (p *Process) dispatch(line []byte) {
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 {
		return
	}
	if trimmed[0] != '{' {
		// Some builds print debug lines on stdout; the SDK skips them too.
		p.log.Debug().Int("bytes", len(trimmed)).Msg("non-JSON claude stdout line skipped")
		return
	}
	m, err := Parse(trimmed)
	if err != nil {
		p.log.Warn().Err(err).Str("type", string(m.Type)).Msg("undecodable claude stdout line skipped")
		return
	}
	switch m.Type {
	case TypeControlResponse:
		p.resolve(m.ControlResponse)
		return
	case TypeControlRequest:
		p.handleControl(m.ControlRequest)
		return
	case TypeControlCancelRequest:
		p.cancelControl(m.ControlCancel.RequestID)
		return
	case TypeKeepAlive:
		return
	}
	if !m.Known() {
		sub := ""
		if m.System != nil {
			sub = string(m.System.Subtype)
		}
		p.log.Debug().Str("type", string(m.Type)).Str("subtype", sub).Msg("unknown claude message")
	}
	p.mu.Lock()
	if sid := m.SessionID(); sid != "" {
		p.sessionID = sid
	}
	if m.Assistant != nil && m.Assistant.ParentToolUseID == nil && m.Assistant.UUID != "" {
		p.lastUUID = m.Assistant.UUID
	}
	p.mu.Unlock()
	p.msgs <- m
}

func (p *Process) resolve(r *ControlResponse) {
	p.mu.Lock()
	ch, ok := p.pending[r.RequestID]
	delete(p.pending, r.RequestID)
	p.mu.Unlock()
	if !ok {
		p.log.Debug().Str("request_id", r.RequestID).Msg("control response for no pending request")
		return
	}
	ch <- *r
}

func (p *Process) cancelControl(id string) {
	p.mu.Lock()
	cancel, ok := p.inflight[id]
	delete(p.inflight, id)
	p.mu.Unlock()
	if ok {
		cancel()
	}
}

// handleControl answers one request from the CLI in its own goroutine. Every
// request gets exactly one answer unless the CLI cancelled it.
func (p *Process) handleControl(req *ControlRequest) {
	ctx, cancel := context.WithCancel(p.hctx)
	p.mu.Lock()
	p.inflight[req.RequestID] = cancel
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer cancel()
		resp, err := p.answer(ctx, req)
		p.mu.Lock()
		_, live := p.inflight[req.RequestID]
		delete(p.inflight, req.RequestID)
		p.mu.Unlock()
		if !live {
			return // cancelled by the CLI: send nothing
		}
		out := controlResponseLine{Type: string(TypeControlResponse)}
		if err != nil {
			p.log.Warn().Err(err).Str("subtype", string(req.Subtype)).Msg("control request answered with an error")
			out.Response = controlResponse{Subtype: "error", RequestID: req.RequestID, Error: err.Error()}
		} else {
			out.Response = controlResponse{Subtype: "success", RequestID: req.RequestID, Response: resp}
		}
		if werr := p.writeLine(out); werr != nil {
			p.log.Warn().Err(werr).Str("subtype", string(req.Subtype)).Msg("control response not delivered")
		}
	}()
}

func (p *Process) answer(ctx context.Context, req *ControlRequest) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s handler panicked: %v", req.Subtype, r)
		}
	}()
	switch req.Subtype {
	case ControlHook:
		var hr hookCallbackRequest
		if err := json.Unmarshal(req.Request, &hr); err != nil {
			return nil, fmt.Errorf("decode hook_callback: %w", err)
		}
		fn, ok := p.hooks[hr.CallbackID]
		if !ok || fn == nil {
			return nil, fmt.Errorf("unknown hook callback id %q", hr.CallbackID)
		}
		var in HookInput
		if len(hr.Input) > 0 {
			if err := json.Unmarshal(hr.Input, &in); err != nil {
				return nil, fmt.Errorf("decode hook input: %w", err)
			}
		}
		in.Raw = hr.Input
		out, err := fn(ctx, in)
		if err != nil {
			return nil, err
		}
		if out == nil {
			return struct{}{}, nil
		}
		return out, nil
	case ControlCanUseTool:
		var tr ToolPermissionRequest
		if err := json.Unmarshal(req.Request, &tr); err != nil {
			return nil, fmt.Errorf("decode can_use_tool: %w", err)
		}
		res, err := p.canUse(ctx, tr)
		if err != nil {
			return nil, err
		}
		if res.Behavior == BehaviorAllow && len(res.UpdatedInput) == 0 {
			res.UpdatedInput = tr.Input
		}
		return res, nil
	default:
		sub := strings.TrimSpace(string(req.Subtype))
		if sub == "" {
			sub = "(none)"
		}
		return nil, fmt.Errorf("unsupported control request subtype: %s", sub)
	}
}
