package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpClients holds the connections to the --mcp-config servers. Like the
// CLI, the fake starts every server at start-up (in the background) and the
// first system/init waits for the attempts to finish.
type mcpClients struct {
	done  chan struct{} // closed when every connection attempt has finished
	names []string

	mu    sync.Mutex
	conns map[string]*mcpConn
}

type mcpConn struct {
	session *mcp.ClientSession
	err     error
	tools   []string
}

// mergeEnv returns base with over's variables set (replacing base's).
func mergeEnv(base []string, over map[string]string) []string {
	out := make([]string, 0, len(base)+len(over))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := over[k]; !ok {
			out = append(out, kv)
		}
	}
	keys := make([]string, 0, len(over))
	for k := range over {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, k+"="+over[k])
	}
	return out
}

func startMCP(ctx context.Context, servers map[string]mcpServerConfig, env []string, stderr io.Writer) *mcpClients {
	c := &mcpClients{done: make(chan struct{}), conns: map[string]*mcpConn{}}
	for name := range servers {
		c.names = append(c.names, name)
	}
	sort.Strings(c.names)
	go func() {
		defer close(c.done)
		var wg sync.WaitGroup
		for _, name := range c.names {
			wg.Add(1)
			go func() {
				defer wg.Done()
				conn := connectMCP(ctx, servers[name], env, stderr)
				c.mu.Lock()
				c.conns[name] = conn
				c.mu.Unlock()
				if conn.err != nil {
					fmt.Fprintf(stderr, "MCP server %q failed to start: %v\n", name, conn.err)
				}
			}()
		}
		wg.Wait()
	}()
	return c
}

func connectMCP(ctx context.Context, cfg mcpServerConfig, env []string, stderr io.Writer) *mcpConn {
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Env = mergeEnv(env, cfg.Env)
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "claude-code", Title: "Claude Code", Version: cliVersion}, nil)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cs, err := client.Connect(cctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil)
	if err != nil {
		return &mcpConn{err: err}
	}
	res, err := cs.ListTools(cctx, nil)
	if err != nil {
		cs.Close()
		return &mcpConn{err: fmt.Errorf("list tools: %w", err)}
	}
	conn := &mcpConn{session: cs}
	for _, t := range res.Tools {
		conn.tools = append(conn.tools, t.Name)
	}
	return conn
}

// wait blocks until every server has connected or failed, and returns
// system/init's mcp_servers and the mcp__ tool names.
func (c *mcpClients) wait(ctx context.Context) ([]any, []string) {
	select {
	case <-c.done:
	case <-ctx.Done():
	}
	servers := []any{}
	var tools []string
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range c.names {
		status := "pending"
		if conn, ok := c.conns[name]; ok {
			status = "connected"
			if conn.err != nil {
				status = "failed"
			}
			for _, t := range conn.tools {
				tools = append(tools, "mcp__"+name+"__"+t)
			}
		}
		servers = append(servers, map[string]any{"name": name, "status": status, "source": "dynamic"})
	}
	return servers, tools
}

// status answers the mcp_status control request.
func (c *mcpClients) status(ctx context.Context) []any {
	servers, _ := c.wait(ctx)
	return servers
}

// resolve maps a fake:tool name (tool, or mcp__server__tool) to a server and
// a tool.
func (c *mcpClients) resolve(name string) (string, string, error) {
	if rest, ok := strings.CutPrefix(name, "mcp__"); ok {
		server, tool, ok := strings.Cut(rest, "__")
		if !ok || server == "" || tool == "" {
			return "", "", fmt.Errorf("bad tool name %q", name)
		}
		return server, tool, nil
	}
	switch {
	case len(c.names) == 1:
		return c.names[0], name, nil
	case len(c.names) == 0:
		return "", "", fmt.Errorf("no MCP server configured (--mcp-config)")
	}
	for _, n := range c.names {
		if n == "bridge" {
			return n, name, nil
		}
	}
	return "", "", fmt.Errorf("several MCP servers configured; name the tool as mcp__<server>__%s", name)
}

// call calls a tool and returns its text content.
func (c *mcpClients) call(ctx context.Context, server, tool string, args json.RawMessage) (string, bool, error) {
	<-c.done
	c.mu.Lock()
	conn, ok := c.conns[server]
	c.mu.Unlock()
	switch {
	case !ok:
		return "", false, fmt.Errorf("no MCP server named %q", server)
	case conn.err != nil:
		return "", false, fmt.Errorf("MCP server %q is not connected: %v", server, conn.err)
	}
	res, err := conn.session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return "", false, err
	}
	var parts []string
	for _, ct := range res.Content {
		if tc, ok := ct.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n"), res.IsError, nil
}

// close ends every session: stdin closed, then the server is waited for.
func (c *mcpClients) close() {
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		if conn.session != nil {
			conn.session.Close()
		}
	}
}
