// Package claudecli drives the Claude Code CLI (`claude`) over its
// stream-json protocol, the way the official Agent SDK does.
//
// The CLI runs in streaming-input mode: argv starts with
// `--output-format stream-json --verbose --input-format stream-json`, followed
// by `--flag=value` options in the SDK's order (Config.Args). The first line
// written to its stdin is an `initialize` control request that registers the
// hooks and, when given, `appendSystemPrompt` (never `systemPrompt`, which
// would replace Claude Code's own prompt). After that, user messages are
// written as the SDK writes them, and stdin stays open for as long as the
// caller wants to keep the session alive.
//
// Every line the CLI prints is parsed into a typed Message (Parse); unknown
// types are tolerated and handed on, never treated as an error. Control
// requests from the CLI are answered by the Process itself: hook callbacks go
// to the registered Go functions, can_use_tool is allowed with the original
// input echoed as updatedInput (or decided by a caller's function), and any
// other subtype gets an error response — never silence.
//
// Only well-formed JSON lines are ever written (one bad line kills the CLI),
// and writes are serialized. The child's environment is exactly what the
// caller passes; the child runs in its own process group so that Stop's
// signals reach the tools it started.
package claudecli
