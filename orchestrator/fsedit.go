package orchestrator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// The fs.edit host request: exact-string replacements in a text file, made as one access.
// The file is opened as fs.read opens it and judged as a write (so a secret asks); its
// content must be the version the request names, when it names one (the SHA-256 of the
// content its sender last saw: what it read is what it changes); every edit is applied in
// order to that content, all or nothing; the result replaces the file as fs.write replaces
// it, atomically, keeping its mode.

// TypeFSEdit is the edit request's type.
const TypeFSEdit = "fs.edit"

// Codes of an edit's refusal, beside those of FSError.
const (
	FSNoMatch      = "no_match"           // an edit's old string is not in the file
	FSManyMatches  = "many_matches"       // it is there more than once, and replace_all is not set
	FSNoChange     = "no_change"          // an edit's old and new strings are the same, or old is empty
	FSChangedSince = "changed_since_read" // the file is not the version named
	FSBinary       = "binary"             // the file is not UTF-8 text
)

// FSEdit is one replacement.
type FSEdit struct {
	Old        string `json:"old_string"`
	New        string `json:"new_string"`
	ReplaceAll bool   `json:"replace_all,omitempty"`
}

// FSEditRequest is the body of fs.edit. Version, when set, is the hex SHA-256 of the content
// the file must hold (Version of a read's content: FSVersion).
type FSEditRequest struct {
	Path    string   `json:"path"`
	Edits   []FSEdit `json:"edits"`
	Version string   `json:"version,omitempty"`
}

// FSEditReply is the reply to fs.edit: the file really edited, its new size and version,
// and how many replacements were made.
type FSEditReply struct {
	Path         string `json:"path"`
	Size         int64  `json:"size"`
	Version      string `json:"version"`
	Replacements int    `json:"replacements"`
}

// FSVersion is the version of a file's content, as fs.edit names it.
func FSVersion(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func (c *FSConfig) edit(ctx context.Context, req HostRequest) (_ any, err error) {
	a := &access{op: FSOp{Write: true, Request: TypeFSEdit}}
	defer func() { c.record(a, err) }()
	var body FSEditRequest
	if err := req.Decode(&body); err != nil {
		return nil, err
	}
	a.op.Sandbox = body.Path
	if len(body.Edits) == 0 {
		return nil, a.refuse(FSBadRequest, "no edit given")
	}
	var f *os.File
	var size int64
	p, err := c.open(a, func(p *spot) error {
		var err error
		f, size, err = openRead(p)
		return err
	})
	if p == nil {
		return nil, err
	}
	defer p.close()
	if f != nil {
		defer f.Close()
	}
	if p.loc.ReadOnly {
		a.decidedBy = "path_map"
		return nil, a.refuse(FSReadOnly, "the mount is read-only")
	}
	if err := c.judge(ctx, a); err != nil {
		return nil, err
	}
	var fd *found
	if errors.As(err, &fd) {
		return nil, a.refuse(fd.code, fd.detail)
	}
	if size > c.MaxRead {
		return nil, a.refuse(FSTooLarge, fmt.Sprintf("%d bytes, over the limit of %d", size, c.MaxRead))
	}
	b, err := io.ReadAll(io.LimitReader(f, c.MaxRead+1))
	switch {
	case err != nil:
		return nil, a.refuse(FSFailed, bareErr(err))
	case int64(len(b)) > c.MaxRead:
		return nil, a.refuse(FSTooLarge, fmt.Sprintf("over the limit of %d bytes", c.MaxRead))
	case !utf8.Valid(b):
		return nil, a.refuse(FSBinary, "not UTF-8 text")
	case body.Version != "" && FSVersion(b) != body.Version:
		return nil, a.refuse(FSChangedSince, "the file changed since it was read: read it again")
	}
	out, n, code, detail := ApplyEdits(string(b), body.Edits)
	if code != "" {
		return nil, a.refuse(code, detail+" (nothing was changed)")
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, a.refuse(FSFailed, bareErr(err))
	}
	var swapped *found
	switch err := replace(p.dir, p.name, []byte(out), &st); {
	case errors.Is(err, errLinked):
		return nil, a.refuse(FSChanged, "the file was replaced by a symlink while it was written")
	case errors.As(err, &swapped):
		return nil, a.refuse(swapped.code, swapped.detail+" (put in place while it was written)")
	case err != nil:
		return nil, a.refuse(FSFailed, bareErr(err))
	}
	return &FSEditReply{Path: c.replyPath(p.host, body.Path), Size: int64(len(out)), Version: FSVersion([]byte(out)), Replacements: n}, nil
}

// ApplyEdits applies edits to s in order. Each old string must be there (once, unless
// ReplaceAll); else nothing is applied and code (no_match, many_matches, no_change) and
// detail say which edit failed and why.
func ApplyEdits(s string, edits []FSEdit) (out string, replaced int, code, detail string) {
	for i, e := range edits {
		at := fmt.Sprintf("edit %d", i+1)
		if len(edits) == 1 {
			at = "the edit"
		}
		switch c := strings.Count(s, e.Old); {
		case e.Old == "":
			return "", 0, FSNoChange, at + ": old_string is empty"
		case e.Old == e.New:
			return "", 0, FSNoChange, at + ": old_string and new_string are the same"
		case c == 0:
			return "", 0, FSNoMatch, at + ": old_string is not in the file"
		case c > 1 && !e.ReplaceAll:
			return "", 0, FSManyMatches, fmt.Sprintf("%s: old_string occurs %d times; give more context to make it unique, or set replace_all", at, c)
		case e.ReplaceAll:
			s = strings.ReplaceAll(s, e.Old, e.New)
			replaced += c
		default:
			s = strings.Replace(s, e.Old, e.New, 1)
			replaced++
		}
	}
	return s, replaced, "", ""
}
