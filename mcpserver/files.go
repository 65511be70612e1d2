package mcpserver

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paddockhq/paddock/errdefs"
	"github.com/paddockhq/paddock/internal/sshfile"
	"github.com/paddockhq/paddock/orchestrator"
)

// The file tools are the session's fs.* host requests, served on the host: each path is
// mapped, opened beneath its mount following no link, and judged by the policy on the
// approval route, exactly as a request from the kernel is. Relative paths are taken from the
// bash tool's working directory.

// Bounds of the read tool, as agents' own read tools have them.
const (
	defaultReadLines = 2000
	maxLineChars     = 2000
)

// ReadIn is the read tool's input.
type ReadIn struct {
	Path   string `json:"path" jsonschema:"the file to read: absolute, relative to the shell's working directory, or ssh://HOST/PATH on a box the settings allow (ssh.hosts)"`
	Offset int    `json:"offset,omitempty" jsonschema:"the line to start at, from 1 (default 1)"`
	Limit  int    `json:"limit,omitempty" jsonschema:"how many lines to read (default 2000)"`
}

// WriteIn is the write tool's input.
type WriteIn struct {
	Path    string `json:"path" jsonschema:"the file to write: absolute, or relative to the shell's working directory"`
	Content string `json:"content" jsonschema:"the file's whole new content"`
}

// EditIn is the edit tool's input: one edit (old_string, new_string) or several (edits),
// applied in order, all or nothing.
type EditIn struct {
	Path       string                `json:"path" jsonschema:"the file to edit: absolute, or relative to the shell's working directory"`
	Old        string                `json:"old_string,omitempty" jsonschema:"the exact text to replace (or give edits)"`
	New        string                `json:"new_string,omitempty" jsonschema:"the text to put in its place"`
	ReplaceAll bool                  `json:"replace_all,omitempty" jsonschema:"replace every occurrence of old_string"`
	Edits      []orchestrator.FSEdit `json:"edits,omitempty" jsonschema:"several edits to the file, applied in order, all or nothing: each an old_string, a new_string and replace_all"`
}

// GlobIn is the glob tool's input.
type GlobIn struct {
	Pattern  string `json:"pattern" jsonschema:"a glob relative to path: **/*.go, src/*.ts, *.md"`
	Path     string `json:"path,omitempty" jsonschema:"the directory to look in (default: the shell's working directory)"`
	Limit    int    `json:"limit,omitempty" jsonschema:"the most paths to return (default 1000)"`
	NoIgnore bool   `json:"no_ignore,omitempty" jsonschema:"also look in what .gitignore files ignore"`
}

// GrepIn is the grep tool's input.
type GrepIn struct {
	Pattern    string `json:"pattern" jsonschema:"a regular expression (RE2 syntax, as ripgrep's)"`
	Path       string `json:"path,omitempty" jsonschema:"a file or directory to search (default: the shell's working directory)"`
	Glob       string `json:"glob,omitempty" jsonschema:"only files whose name matches, e.g. *.go (with a /, their path: src/**/*.ts)"`
	OutputMode string `json:"output_mode,omitempty" jsonschema:"content (matching lines, the default), files_with_matches or count"`
	IgnoreCase bool   `json:"ignore_case,omitempty" jsonschema:"match case-insensitively (rg -i)"`
	Before     int    `json:"before,omitempty" jsonschema:"lines of context before each match (rg -B)"`
	After      int    `json:"after,omitempty" jsonschema:"lines of context after each match (rg -A)"`
	Context    int    `json:"context,omitempty" jsonschema:"lines of context before and after each match (rg -C)"`
	Limit      int    `json:"limit,omitempty" jsonschema:"the most lines, files or counts to return (default 1000)"`
	NoIgnore   bool   `json:"no_ignore,omitempty" jsonschema:"also search what .gitignore files ignore"`
}

// LsIn is the ls tool's input.
type LsIn struct {
	Path  string `json:"path,omitempty" jsonschema:"the directory to list (default: the shell's working directory)"`
	Limit int    `json:"limit,omitempty" jsonschema:"the most entries to return (default 1000)"`
}

func (x *Server) addFileTools() {
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)}
	tool(x, &mcp.Tool{Name: "read", Annotations: ro, Description: `Read a text file in the sandbox, with line numbers (cat -n). Reads 2000 lines from the
start unless offset and limit say otherwise; longer lines are cut. A binary file is refused with
its size and type. Secrets (keys, .env files, credential stores) are asked of the person first.`}, x.read)
	tool(x, &mcp.Tool{Name: "write", Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
		Description: `Write a file in the sandbox, whole and atomically. An existing file is replaced only if this session read
it (with read) and it has not changed since; a new file needs its directory to exist.`}, x.write)
	tool(x, &mcp.Tool{Name: "edit", Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
		Description: `Replace exact text in a file this session read. old_string must occur exactly once unless
replace_all is set; give edits for several replacements, applied in order, all or nothing.`}, x.edit)
	tool(x, &mcp.Tool{Name: "glob", Annotations: ro, Description: `Find files by a glob pattern (**/*.go), the most recently modified first. Skips .git and what
.gitignore files ignore; follows no symlink.`}, x.glob)
	tool(x, &mcp.Tool{Name: "grep", Annotations: ro, Description: `Search file contents with a regular expression, as ripgrep does: file globs, context lines,
files_with_matches and count modes; skips .git, what .gitignore ignores, binary files, and the
files the policy would not let be read unasked (named in the result: read one to be asked).`}, x.grep)
	tool(x, &mcp.Tool{Name: "ls", Annotations: ro, Description: "List a directory in the sandbox: each entry's name, kind and size; a symlink with its target."}, x.ls)
}

// serve makes one fs request of the session and decodes its reply into R.
func serve[R any](ctx context.Context, x *Server, typ string, body any) (*R, error) {
	var r R
	if err := x.s.Request(ctx, typ, body, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// readFile reads a file through fs.read: its reply, and its bytes; a binary file is refused
// with its size and type.
func (x *Server) readFile(ctx context.Context, p string) (*orchestrator.FSReply, []byte, error) {
	r, err := serve[orchestrator.FSReply](ctx, x, orchestrator.TypeFSRead, orchestrator.FSReadRequest{Path: p})
	if err != nil {
		return nil, nil, err
	}
	b := []byte(r.Content)
	if r.Encoding == "base64" {
		if b, err = base64.StdEncoding.DecodeString(r.Content); err != nil {
			return nil, nil, err
		}
	}
	return r, b, nil
}

// binary is the refusal of a binary file.
func binary(r *orchestrator.FSReply, b []byte) error {
	return errdefs.New(errdefs.InvalidArgument, "binary", fmt.Sprintf("%s is a binary file (%d bytes, %s); look at it with bash (xxd, file)", r.Path, r.Size, http.DetectContentType(b)))
}

// remember notes the version of a file this session read or wrote, under each of its paths
// (as asked, and where it really is).
func (x *Server) remember(version string, paths ...string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, p := range paths {
		x.seen[p] = version
	}
}

// version is the version of the file at p this session last read or wrote; "" for none.
func (x *Server) version(p string) string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.seen[p]
}

// current checks that the file at r (read now, b) is the version this session last read or
// wrote.
func (x *Server) current(r *orchestrator.FSReply, b []byte) error {
	x.mu.Lock()
	was, ok := x.seen[r.Path]
	x.mu.Unlock()
	switch {
	case !ok:
		return errdefs.New(errdefs.Conflict, "not_read", fmt.Sprintf("%s exists and this session has not read it: read it first", r.Path))
	case was != orchestrator.FSVersion(b):
		return errdefs.New(errdefs.Conflict, "changed_since_read", fmt.Sprintf("%s changed since this session read it: read it again", r.Path))
	}
	return nil
}

func (x *Server) read(ctx context.Context, _ *mcp.CallToolRequest, in ReadIn) (*mcp.CallToolResult, any, error) {
	if in.Offset < 0 || in.Limit < 0 {
		return refuse(errdefs.InvalidArgument, "bad_request", "offset and limit must not be negative")
	}
	if strings.HasPrefix(in.Path, "ssh://") {
		return x.readSSH(ctx, in)
	}
	p := x.abs(in.Path)
	r, b, err := x.readFile(ctx, p)
	if err != nil {
		return fail(err)
	}
	if r.Encoding == "base64" {
		return fail(binary(r, b))
	}
	x.remember(orchestrator.FSVersion(b), p, r.Path)
	return numbered(r.Path, string(b), in, "")
}

// numbered is a file's text as read gives it: the lines from offset, at most limit of them,
// each with its number; a note ends it when that is not the whole file.
func numbered(name, s string, in ReadIn, note string) (*mcp.CallToolResult, any, error) {
	if s == "" {
		return text(fmt.Sprintf("[%s is empty]\n%s", name, note)), nil, nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	from := max(in.Offset, 1)
	limit := in.Limit
	if limit == 0 {
		limit = defaultReadLines
	}
	if from > len(lines) {
		return refuse(errdefs.InvalidArgument, "bad_offset", "%s has %d lines; offset %d is past its end", name, len(lines), from)
	}
	to := min(from-1+limit, len(lines))
	var out strings.Builder
	for i := from - 1; i < to; i++ {
		l := strings.TrimRight(lines[i], "\n")
		if len(l) > maxLineChars {
			l = l[:maxLineChars] + " … [line cut]"
		}
		fmt.Fprintf(&out, "%6d\t%s\n", i+1, l)
	}
	if from > 1 || to < len(lines) {
		fmt.Fprintf(&out, "[lines %d-%d of %d of %s]\n", from, to, len(lines), name)
	}
	out.WriteString(note)
	return text(out.String()), nil, nil
}

// sshClasses are the classes of sshfile's refusals.
var sshClasses = map[string]errdefs.Class{
	sshfile.NotAllowed: errdefs.PermissionDenied, sshfile.PermissionDenied: errdefs.PermissionDenied,
	sshfile.Arguments: errdefs.InvalidArgument, sshfile.Escapes: errdefs.InvalidArgument,
	sshfile.Binary: errdefs.InvalidArgument, sshfile.IsDirectory: errdefs.InvalidArgument,
	sshfile.NotFound: errdefs.NotFound, sshfile.Timeout: errdefs.DeadlineExceeded,
	sshfile.Host: errdefs.Unavailable, sshfile.Auth: errdefs.Unavailable, sshfile.IO: errdefs.Unavailable,
}

// readSSH reads a file on a box the trusted settings list (ssh.hosts), over SFTP: a text
// file's first bytes (sshfile's cap), numbered as any read.
func (x *Server) readSSH(ctx context.Context, in ReadIn) (*mcp.CallToolResult, any, error) {
	if x.ssh == nil {
		return refuse(errdefs.PermissionDenied, sshfile.NotAllowed, "ssh:// reads need a box listed in the setting ssh.hosts (global settings only)")
	}
	res, err := x.ssh.Read(ctx, in.Path)
	var rj *sshfile.Rejection
	if errors.As(err, &rj) {
		return fail(errdefs.New(sshClasses[rj.Code], rj.Code, rj.Msg))
	}
	if err != nil {
		return fail(err)
	}
	note := ""
	if res.Dropped > 0 {
		note = fmt.Sprintf("[%s: %d of its %d bytes are not shown: a box's file is read up to %d bytes]\n", res.URL, res.Dropped, res.Bytes, res.Bytes-res.Dropped)
	}
	return numbered(res.URL, res.Text, in, note)
}

// notFound reports an fs refusal for a file that is not there, by its stable code: the
// session's own error, or a daemon's answer carrying it.
func notFound(err error) bool {
	_, code := errdefs.Of(err)
	return err != nil && code == orchestrator.FSNotFound
}

func (x *Server) write(ctx context.Context, _ *mcp.CallToolRequest, in WriteIn) (*mcp.CallToolResult, any, error) {
	p := x.abs(in.Path)
	r, b, err := x.readFile(ctx, p)
	switch {
	case notFound(err):
	case err != nil:
		return fail(err)
	default:
		if err := x.current(r, b); err != nil {
			return fail(err)
		}
		p = r.Path
	}
	w, err := serve[orchestrator.FSReply](ctx, x, orchestrator.TypeFSWrite, orchestrator.FSWriteRequest{Path: p, Content: in.Content})
	if err != nil {
		return fail(err)
	}
	x.remember(orchestrator.FSVersion([]byte(in.Content)), x.abs(in.Path), w.Path)
	verb := "created"
	if r != nil {
		verb = "replaced"
	}
	return text(fmt.Sprintf("%s %s (%d bytes)\n", verb, w.Path, w.Size)), nil, nil
}

func (x *Server) edit(ctx context.Context, _ *mcp.CallToolRequest, in EditIn) (*mcp.CallToolResult, any, error) {
	edits := in.Edits
	if in.Old != "" || in.New != "" {
		if len(edits) > 0 {
			return refuse(errdefs.InvalidArgument, "bad_request", "give old_string and new_string, or edits, not both")
		}
		edits = []orchestrator.FSEdit{{Old: in.Old, New: in.New, ReplaceAll: in.ReplaceAll}}
	}
	if len(edits) == 0 {
		return refuse(errdefs.InvalidArgument, "bad_request", "no edit given")
	}
	p := x.abs(in.Path)
	v := x.version(p)
	if v == "" {
		return refuse(errdefs.Conflict, "not_read", "%s: this session has not read it: read it first", p)
	}
	// One request: the file must still be the version read; every edit or none.
	r, err := serve[orchestrator.FSEditReply](ctx, x, orchestrator.TypeFSEdit, orchestrator.FSEditRequest{Path: p, Edits: edits, Version: v})
	if err != nil {
		return fail(err)
	}
	x.remember(r.Version, p, r.Path)
	return text(fmt.Sprintf("edited %s: %d replacements (%d bytes)\n", r.Path, r.Replacements, r.Size)), nil, nil
}

func (x *Server) glob(ctx context.Context, _ *mcp.CallToolRequest, in GlobIn) (*mcp.CallToolResult, any, error) {
	r, err := serve[orchestrator.FSGlobReply](ctx, x, orchestrator.TypeFSGlob, orchestrator.FSGlobRequest{Path: x.abs(in.Path), Pattern: in.Pattern, Limit: in.Limit, NoIgnore: in.NoIgnore})
	if err != nil {
		return fail(err)
	}
	var out strings.Builder
	for _, m := range r.Matches {
		out.WriteString(m.Path + "\n")
	}
	if len(r.Matches) == 0 {
		fmt.Fprintf(&out, "no files under %s match %s\n", r.Path, in.Pattern)
	}
	if r.Truncated {
		out.WriteString("[more files match: narrow the pattern or raise limit]\n")
	}
	return text(out.String()), nil, nil
}

func (x *Server) grep(ctx context.Context, _ *mcp.CallToolRequest, in GrepIn) (*mcp.CallToolResult, any, error) {
	mode := map[string]string{"": orchestrator.GrepContent, "content": orchestrator.GrepContent,
		"files_with_matches": orchestrator.GrepFiles, "count": orchestrator.GrepCount}[in.OutputMode]
	if mode == "" {
		return refuse(errdefs.InvalidArgument, "bad_request", "output_mode %q is not content, files_with_matches or count", in.OutputMode)
	}
	before, after := in.Before, in.After
	if in.Context != 0 {
		before, after = max(before, in.Context), max(after, in.Context)
	}
	r, err := serve[orchestrator.FSGrepReply](ctx, x, orchestrator.TypeFSGrep, orchestrator.FSGrepRequest{Path: x.abs(in.Path),
		Pattern: in.Pattern, Glob: in.Glob, IgnoreCase: in.IgnoreCase, Mode: mode, Before: before, After: after, Limit: in.Limit, NoIgnore: in.NoIgnore})
	if err != nil {
		return fail(err)
	}
	var out strings.Builder
	switch mode {
	case orchestrator.GrepFiles:
		for _, f := range r.Files {
			out.WriteString(f + "\n")
		}
	case orchestrator.GrepCount:
		for _, c := range r.Counts {
			fmt.Fprintf(&out, "%s:%d\n", c.Path, c.Count)
		}
	default:
		writeLines(&out, r.Lines)
	}
	if out.Len() == 0 {
		out.WriteString("no matches\n")
	}
	if r.Truncated {
		out.WriteString("[more matches: narrow the search or raise limit]\n")
	}
	if len(r.Skipped) > 0 {
		fmt.Fprintf(&out, "[not searched, as the policy does not let them be read unasked: %s; read one with the read tool to be asked]\n", strings.Join(r.Skipped, ", "))
	}
	if r.Binary > 0 {
		fmt.Fprintf(&out, "[%d binary files not searched]\n", r.Binary)
	}
	if r.Large > 0 {
		fmt.Fprintf(&out, "[%d files over the read limit not searched]\n", r.Large)
	}
	res := text(out.String())
	res.StructuredContent = r
	return res, nil, nil
}

// writeLines renders grep's lines as ripgrep does with a path: path:line:text for a match,
// path-line-text for context, -- between groups that do not touch.
func writeLines(out *strings.Builder, lines []orchestrator.FSGrepLine) {
	for i, l := range lines {
		if i > 0 && (lines[i-1].Path != l.Path || lines[i-1].Line+1 != l.Line) && (l.Context || lines[i-1].Context) {
			out.WriteString("--\n")
		}
		sep := ":"
		if l.Context {
			sep = "-"
		}
		fmt.Fprintf(out, "%s%s%d%s%s\n", l.Path, sep, l.Line, sep, l.Text)
	}
}

func (x *Server) ls(ctx context.Context, _ *mcp.CallToolRequest, in LsIn) (*mcp.CallToolResult, any, error) {
	r, err := serve[orchestrator.FSListReply](ctx, x, orchestrator.TypeFSList, orchestrator.FSPathRequest{Path: x.abs(in.Path), Limit: in.Limit})
	if err != nil {
		return fail(err)
	}
	var out strings.Builder
	fmt.Fprintf(&out, "%s:\n", r.Path)
	for _, e := range r.Entries {
		name := e.Path[strings.LastIndexByte(e.Path, '/')+1:]
		switch e.Kind {
		case "dir":
			fmt.Fprintf(&out, "  %s/\n", name)
		case "symlink":
			fmt.Fprintf(&out, "  %s -> %s\n", name, e.Target)
		case "file":
			fmt.Fprintf(&out, "  %s (%d bytes)\n", name, e.Size)
		default:
			fmt.Fprintf(&out, "  %s (%s)\n", name, e.Kind)
		}
	}
	if r.Truncated {
		out.WriteString("[more entries: raise limit]\n")
	}
	res := text(out.String())
	res.StructuredContent = r
	return res, nil, nil
}
