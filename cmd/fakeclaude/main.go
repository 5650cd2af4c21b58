// Command fakeclaude is a stand-in for the Claude Code CLI (`claude`) in
// bridged's tests and test image. It speaks the CLI's streaming protocol as
// recorded in the claude-cli fixtures (--input-format/--output-format
// stream-json): it answers initialize and the other control requests, prints
// one system/init per turn, assistant lines and a result line per turn, keeps
// session transcripts under $HOME/.claude/projects/<cwd slug>/<session>.jsonl so
// --resume works from any working directory, and fails at start-up like the
// real CLI for an unknown --resume id or for bypass mode as root.
//
// It has no model. What a turn does is scripted by directives in the latest
// user message, after XML unescaping: every "fake:<verb>" in the text runs, in
// order, with its arguments running to the end of the line (or to the next
// directive on that line). When the prompt holds <message> elements (bridged's
// prompt format), directives are read from the messages' texts.
//
//	fake:reply <text>       reply with text (several replies join with newlines)
//	fake:sleep <duration>   wait (a Go duration); an interrupt cuts it short
//	fake:stall <duration>   print nothing at all for the duration, before the turn's first event (a CLI that hangs at start)
//	fake:crash              exit 2 mid-turn, after system/init and an assistant line
//	fake:error <text>       end the turn with an API-error result (is_error, like fixture 08)
//	fake:tool <name> <json> call an MCP tool of a --mcp-config server, reply with its answer
//	                        ("tool error: " first when the tool reports an error)
//	fake:bash <command>     fire the PreToolUse hook for Bash, run the command it returns
//	                        (with /bin/sh, or a tiny built-in interpreter for `unset A B; env`,
//	                        `env` and `echo` when there is no shell), reply with its output
//	                        The call is settled like the CLI's (disallowed → hook allow →
//	                        allowed → mode → can_use_tool): in default mode a command that is
//	                        not read-only asks the host (--permission-prompt-tool stdio), runs
//	                        the answer's updatedInput, and a deny becomes the tool's error
//	fake:write <path> <text> the Write tool (settled the same way), writes text to path
//	fake:fetch <url>        the WebFetch tool (settled the same way); replies "fetched <url>",
//	                        nothing is fetched
//	fake:compact            a /compact turn: PreCompact hook, then fixture 05's compact result
//	fake:pid                reply "pid=<pid> session=<session id>"
//	fake:api [stream] [text] one POST $ANTHROPIC_BASE_URL/v1/messages?beta=true, credentials sent
//	                        as the real CLI sends them (x-api-key from ANTHROPIC_API_KEY, else
//	                        Authorization: Bearer from CLAUDE_CODE_OAUTH_TOKEN); reply with the
//	                        response's text (streaming: the text deltas, each event logged on
//	                        stderr as "fakeclaude: api event <n> <type>"); an HTTP error ends the
//	                        turn with an API-error result carrying the status
//	fake:prompt             reply with the turn's whole prompt, as given
//	fake:memory             reply with the memory the CLI was given: the CLAUDE.md files it loads (the
//	                        working directory's when the project source loads, each --add-dir's too with
//	                        CLAUDE_CODE_ADDITIONAL_DIRECTORIES_CLAUDE_MD=1) and the appended system prompt
//	                        (--append-system-prompt, initialize's appendSystemPrompt)
//
// `fakeclaude remote-control [--name NAME]` stands in for the CLI's remote
// control: it answers its "Enable Remote Control? (y/n)" from stdin, prints
// "Session URL: https://claude.ai/code?bridge=env_…" and stays up until it is
// signalled; a Claude credential in its environment makes it fail, as the
// real one does (remote.go).
//
// Without directives the reply is "echo: " and the text of the last <message>
// element, or the whole prompt when there is none.
//
// Settings files, hooks, env blocks, skills and .mcp.json are loaded and
// applied as the CLI does, from the sources --setting-sources names, the
// --settings flag and the managed settings (settings.go).
//
// Environment: FAKECLAUDE_MANAGED_DIR=<dir> reads the managed settings from
// dir instead of /etc/claude-code (unit tests); FAKECLAUDE_STDIN_LOG=<path> appends "<unix nanos> <type> <first
// 1000 bytes of text>" for every stdin line as it is read (latency benchmarks);
// FAKECLAUDE_NO_SHELL=1 uses the built-in interpreter even when /bin/sh exists.
package main

import (
	"context"
	"os"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ(), os.Getuid()))
}
