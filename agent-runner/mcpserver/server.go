package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bridged-app/bridged/internal/ipc"
)

// ServerName is the name the server reports; the agent sees its tools as
// mcp__bridge__<tool>.
const ServerName = "bridge"

// Version is the server version reported to clients.
const Version = "1.0.0"

// Run serves MCP over in/out until in reaches EOF or ctx ends. It returns nil
// on a clean end of input.
func Run(ctx context.Context, cfg Config, in io.Reader, out io.Writer) error {
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("mcp server: %w", err)
	}
	if cfg.Channel != "" {
		return serve(ctx, cfg, newChannel(cfg.Channel, cfg.timeout(), cfg.Log), in, out)
	}
	layout := ipc.Layout{Root: cfg.IPCDir}
	if err := layout.Ensure(); err != nil {
		return fmt.Errorf("mcp server: %w", err)
	}
	w, err := ipc.NewWatcher(0)
	if err != nil {
		return fmt.Errorf("mcp server: %w", err)
	}
	if err := w.Add(layout.Responses()); err != nil {
		w.Close()
		return fmt.Errorf("mcp server: %w", err)
	}
	h := newHost(layout, cfg.timeout(), cfg.Log)

	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := w.Run(ctx, h.scan); err != nil {
			cfg.Log.Warn().Err(err).Msg("response watcher stopped")
		}
	}()
	defer func() {
		cancel()
		wg.Wait()
	}()

	return serve(ctx, cfg, h, in, out)
}

// serve serves MCP over in/out with h carrying the tools' requests.
func serve(ctx context.Context, cfg Config, h caller, in io.Reader, out io.Writer) error {
	srv := newServer(cfg, h)
	cfg.Log.Info().Bool("main", cfg.IsMain).Bool("channel", cfg.Channel != "").Str("timezone", cfg.location().String()).Msg("mcp server started")
	err := srv.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}})
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, mcp.ErrConnectionClosed) && ctx.Err() == nil {
		return fmt.Errorf("mcp server: %w", err)
	}
	cfg.Log.Info().Msg("mcp server stopped")
	return nil
}

// refuseDiscover answers the server/discover probe with "method not found".
// Claude Code sends the probe before initialize and then performs the classic
// initialize handshake; if the SDK answered the probe, it would treat the
// session as initialized and refuse that initialize as a duplicate, and the
// CLI would lose the server.
func refuseDiscover(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "server/discover" {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: server/discover"}
		}
		return next(ctx, method, req)
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// newServer builds the MCP server with every tool registered.
func newServer(cfg Config, h caller) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: ServerName, Version: Version}, nil)
	srv.AddReceivingMiddleware(refuseDiscover)
	t := &tools{cfg: cfg, host: h}
	t.register(srv)
	return srv
}
