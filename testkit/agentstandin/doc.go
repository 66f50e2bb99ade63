// Package agentstandin is the stand-in for the agent CLI (Claude Code) in the wrapper's process tests,
// which need no real CLI; the e2e runs use the real one, with the model stand-in as their one
// double. Toward the wrapper it behaves like the real CLI: it
// accepts the same flags, prints stream-json on stdout (system/init first, result last) and writes
// its transcript in the real JSONL format to <CLAUDE_CONFIG_DIR or ~/.claude>/projects/<slug>/
// <session-id>.jsonl, creating the file only once the first line is ready and after a short delay,
// one line per content block with the blocks of one reply sharing message.id, and every few lines
// flushing one line in two chunks. Toward the MCP server it is a real client: it reads the
// servers from --mcp-config and speaks streamable HTTP (mark3labs/mcp-go).
//
// Instead of a model it follows a script, given as the prompt (the last argument, or stdin when
// there is none). One step per line; blank lines and lines starting with # are ignored:
//
//	say <text>                 assistant text block
//	think <text>               assistant thinking block
//	list-tools                 MCP tools/list on the server; the tool names are recorded as a
//	                           text block "tools (<n>): <a>, <b>, ..." in list order
//	call <tool> [<json>]       MCP tools/call. <tool> is a bare tool name (called on the server
//	                           named tatara, or on the only server configured) or
//	                           mcp__<server>__<tool>. <json> is the arguments object (default {}).
//	                           Writes the assistant tool_use line (name mcp__<server>__<tool>)
//	                           before the call and the user tool_result line after it, as the
//	                           agent CLI does. A tool error is recorded (is_error true) and the
//	                           script goes on; a transport error ends the run with exit code 1.
//	expect <text>              exit 1 unless the last call result or tool list contains <text>
//	emit-tool-use <name> [<json>]
//	                           write a tool_use block named <name> with <json> as its input
//	                           (default {}) and a tool_result for it, without calling MCP (for
//	                           tests that have no MCP server)
//	raw <text>                 write <text> as one transcript line, verbatim; a Go-quoted
//	                           "..." text is unquoted first, so damage such as NUL runs can be
//	                           written ("\x00\x00{...}")
//	sleep <duration>           wait (Go duration: 500ms, 2s); SIGTERM interrupts it
//	exit <code>                stop now with this exit code (default at the end of the script: 0)
//
// Unlike the agent CLI, --mcp-config takes one value per occurrence (repeat the flag for more);
// --mcp-config=<path>, the form the wrapper writes, works with both. An unknown flag is an error
// that names it (exit code 2).
//
// As in the agent CLI, --no-session-persistence or an inherited CLAUDE_CODE_CHILD_SESSION turns
// the transcript off (stream-json output stays).
//
// Environment knobs (tests only): STANDIN_CREATE_DELAY (default 300ms) delays the transcript's
// creation; STANDIN_SPLIT_EVERY (default 3, 0 disables) writes every n-th line in two chunks
// STANDIN_SPLIT_PAUSE (default 50ms) apart.
package agentstandin
