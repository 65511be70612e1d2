package api

import "time"

// The tree requests and edits, served as the sandbox's own host requests are (the path map,
// the policy's route, an audit record each): the bodies and replies of .../fs/stat, list,
// glob, grep and edit.

// FSPathRequest is the body of a stat or a list: a sandbox path, and for a list the most
// entries to return (0: the default).
type FSPathRequest struct {
	Path  string `json:"path"`
	Limit int    `json:"limit,omitempty"`
}

// FSEntry is one file, directory or link; the reply to a stat.
type FSEntry struct {
	Path     string    `json:"path"` // its sandbox path
	Kind     string    `json:"kind"` // file, dir, symlink or other
	Size     int64     `json:"size"`
	Mode     uint32    `json:"mode"` // its permission bits
	Modified time.Time `json:"modified"`
	Target   string    `json:"target,omitempty"` // a symlink's target, as written
}

// FSListReply answers a list: the directory's entries, sorted by name.
type FSListReply struct {
	Path      string    `json:"path"`
	Entries   []FSEntry `json:"entries"`
	Truncated bool      `json:"truncated,omitempty"`
}

// FSGlobRequest asks for the files under Path whose path relative to it matches Pattern
// (**/*.go), at most Limit; .git and what .gitignore ignores are skipped unless NoIgnore.
type FSGlobRequest struct {
	Path     string `json:"path"`
	Pattern  string `json:"pattern"`
	Limit    int    `json:"limit,omitempty"`
	NoIgnore bool   `json:"no_ignore,omitempty"`
}

// FSGlobReply answers a glob: the matches, the most recently modified first.
type FSGlobReply struct {
	Path      string    `json:"path"`
	Matches   []FSEntry `json:"matches"`
	Truncated bool      `json:"truncated,omitempty"`
}

// FSGrepRequest asks for the lines under Path that match the regular expression Pattern,
// as ripgrep finds them; Mode is content (default), files or count.
type FSGrepRequest struct {
	Path       string `json:"path"`
	Pattern    string `json:"pattern"`
	Glob       string `json:"glob,omitempty"`
	IgnoreCase bool   `json:"ignore_case,omitempty"`
	Mode       string `json:"mode,omitempty"`
	Before     int    `json:"before,omitempty"`
	After      int    `json:"after,omitempty"`
	Limit      int    `json:"limit,omitempty"`
	NoIgnore   bool   `json:"no_ignore,omitempty"`
}

// FSGrepLine is a matching line, or a line of context around one.
type FSGrepLine struct {
	Path    string `json:"path"`
	Line    int    `json:"line"`
	Text    string `json:"text"`
	Context bool   `json:"context,omitempty"`
}

// FSGrepCount is a file's count of matching lines.
type FSGrepCount struct {
	Path  string `json:"path"`
	Count int    `json:"count"`
}

// FSGrepReply answers a grep. Skipped names the files not read because the policy would not
// let them be read unasked; Binary and Large count the files skipped as binary or too large.
type FSGrepReply struct {
	Path      string        `json:"path"`
	Lines     []FSGrepLine  `json:"lines,omitempty"`
	Files     []string      `json:"files,omitempty"`
	Counts    []FSGrepCount `json:"counts,omitempty"`
	Skipped   []string      `json:"skipped,omitempty"`
	Binary    int           `json:"binary,omitempty"`
	Large     int           `json:"large,omitempty"`
	Truncated bool          `json:"truncated,omitempty"`
}

// FSEdit is one exact-string replacement: Old must occur once unless ReplaceAll.
type FSEdit struct {
	Old        string `json:"old_string"`
	New        string `json:"new_string"`
	ReplaceAll bool   `json:"replace_all,omitempty"`
}

// FSEditRequest edits a file, all its edits or none; Version, when set, is the hex SHA-256
// of the content the file must hold.
type FSEditRequest struct {
	Path    string   `json:"path"`
	Edits   []FSEdit `json:"edits"`
	Version string   `json:"version,omitempty"`
}

// FSEditReply answers an edit: the file really edited, its new size and version, and how
// many replacements were made.
type FSEditReply struct {
	Path         string `json:"path"`
	Size         int64  `json:"size"`
	Version      string `json:"version"`
	Replacements int    `json:"replacements"`
}
