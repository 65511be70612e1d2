package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"golang.org/x/sys/unix"
)

// Options say where Load looks.
type Options struct {
	// GlobalFile is the trusted settings file; "": the first of settings.json, .yaml, .yml
	// and .toml in the global directory that exists.
	GlobalFile string
	// Workspace is the project's directory; its .paddock/settings.* is read, untrusted.
	// "": no project settings.
	Workspace string
	// Flags and FlagKeys bind command-line flags (by name) to settings keys.
	Flags    *pflag.FlagSet
	FlagKeys map[string]string
	// Set gives settings keys values above every other source, as flags do (a daemon's
	// request); SetBy names that source ("request").
	Set   map[string]any
	SetBy string
}

// Loaded is the outcome of Load.
type Loaded struct {
	Settings Settings
	// Files are the settings files read, global first.
	Files []string
	// Sources says where each key's value came from: "flag --name", "env NAME", a file's
	// path, or "default".
	Sources map[string]string
	// Ignored is what of the project's settings file did not apply.
	Ignored []Ignored
	// Warnings name what was ignored, e.g. a key a project's settings may not set.
	Warnings []string
}

// Dir is the global settings directory: $XDG_CONFIG_HOME/paddock, else ~/.config/paddock.
func Dir() string {
	if x := os.Getenv("XDG_CONFIG_HOME"); x != "" {
		return filepath.Join(x, "paddock")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".config", "paddock")
}

var extensions = []string{"json", "yaml", "yml", "toml"}

// find returns the first settings.EXT in dir that exists, or "".
func find(dir string) string {
	for _, ext := range extensions {
		p := filepath.Join(dir, "settings."+ext)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// Load reads the settings: flags, then PADDOCK_* environment variables (PADDOCK_SHELL_AUTOEFFECTS
// for shell.autoEffects), then the global file, then the project's file, then the defaults.
// The project's file is decoded by DecodeProject: only what a project may set applies, below
// every trusted source; the rest is in Ignored and Warnings.
func Load(o Options) (*Loaded, error) {
	var pf *projectFile
	if o.Workspace != "" {
		pf = readProject(o.Workspace)
	}
	return load(o, pf)
}

// projectFile is a project's settings file as read: its path and bytes, or why it was not read.
type projectFile struct {
	path   string
	data   []byte
	unread *Ignored
}

// load is Load with the project's file already read (nil: there is none).
func load(o Options, pf *projectFile) (*Loaded, error) {
	l := &Loaded{Sources: map[string]string{}}
	v := viper.New()
	defaults, err := flatMap(Defaults())
	if err != nil {
		return nil, err
	}
	for k, val := range defaults {
		v.SetDefault(k, val)
	}
	var project, global map[string]any
	if pf != nil {
		l.Files = append(l.Files, pf.path)
		var p Project
		if pf.unread != nil {
			l.Ignored = []Ignored{*pf.unread}
		} else {
			p, l.Ignored = DecodeProject(pf.path, pf.data)
		}
		for _, ig := range l.Ignored {
			l.Warnings = append(l.Warnings, ig.String())
		}
		project = p.values()
		if err := v.MergeConfigMap(nest(project)); err != nil {
			return nil, err
		}
	}
	gf := o.GlobalFile
	if gf == "" {
		gf = find(Dir())
	} else if _, err := os.Stat(gf); err != nil {
		return nil, fmt.Errorf("settings: %w", err)
	}
	if gf != "" {
		all, err := readFile(gf)
		if err != nil {
			return nil, err
		}
		global = flatten("", all)
		l.Files = append([]string{gf}, l.Files...)
		if err := v.MergeConfigMap(all); err != nil {
			return nil, err
		}
	}
	v.SetEnvPrefix("PADDOCK")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	for name, key := range o.FlagKeys {
		if f := lookup(o.Flags, name); f != nil {
			if err := v.BindPFlag(key, f); err != nil {
				return nil, err
			}
		}
	}
	for key, val := range o.Set {
		v.Set(key, val)
	}
	s := Defaults()
	err = v.Unmarshal(&s, viper.DecodeHook(mapstructure.ComposeDecodeHookFunc(
		mapstructure.TextUnmarshallerHookFunc(),
		mapstructure.StringToSliceHookFunc(","),
	)))
	if err != nil {
		return nil, fmt.Errorf("settings: %w", err)
	}
	l.Settings = s
	flagOf := map[string]string{}
	for name, key := range o.FlagKeys {
		if f := lookup(o.Flags, name); f != nil && f.Changed {
			flagOf[strings.ToLower(key)] = "flag --" + name
		}
	}
	for key := range o.Set {
		flagOf[strings.ToLower(key)] = o.SetBy
	}
	for _, k := range v.AllKeys() {
		env := "PADDOCK_" + strings.ToUpper(strings.ReplaceAll(k, ".", "_"))
		switch _, inEnv := os.LookupEnv(env); {
		case flagOf[k] != "":
			l.Sources[k] = flagOf[k]
		case inEnv:
			l.Sources[k] = "env " + env
		case has(global, k):
			l.Sources[k] = gf
		case has(project, k):
			l.Sources[k] = l.Files[len(l.Files)-1]
		default:
			l.Sources[k] = "default"
		}
	}
	return l, nil
}

// lookup is the flag of that name; nil when there are no flags.
func lookup(fs *pflag.FlagSet, name string) *pflag.Flag {
	if fs == nil {
		return nil
	}
	return fs.Lookup(name)
}

func has(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}

// readProject reads the first of workspace/.paddock/settings.{json,yaml,yml,toml} that
// exists; nil when none does. Neither .paddock nor the file is followed when it is a symbolic
// link, and only a regular file of at most MaxProjectFileBytes is read: a project cannot make
// the host read another file, block on a FIFO or read without end from a device.
func readProject(workspace string) *projectFile {
	dir := filepath.Join(workspace, ".paddock")
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		// A link opened with O_NOFOLLOW|O_DIRECTORY is ENOTDIR, like a plain file: tell them apart.
		if errors.Is(err, unix.ENOTDIR) {
			if fi, lerr := os.Lstat(dir); lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
				err = unix.ELOOP
			}
		}
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return nil
		}
		return &projectFile{path: dir, unread: &Ignored{File: dir, code: IgnoredUnreadable, reason: unreadable(err)}}
	}
	defer unix.Close(dfd)
	for _, ext := range extensions {
		p := filepath.Join(dir, "settings."+ext)
		fd, err := unix.Openat(dfd, "settings."+ext, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		pf := &projectFile{path: p}
		if err != nil {
			pf.unread = &Ignored{File: p, code: IgnoredUnreadable, reason: unreadable(err)}
			return pf
		}
		f := os.NewFile(uintptr(fd), p)
		defer f.Close()
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			pf.unread = &Ignored{File: p, code: IgnoredUnreadable, reason: unreadable(err)}
			return pf
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			pf.unread = &Ignored{File: p, code: IgnoredUnreadable, reason: "it is not a regular file"}
			return pf
		}
		data, err := io.ReadAll(io.LimitReader(f, MaxProjectFileBytes+1))
		switch {
		case err != nil:
			pf.unread = &Ignored{File: p, code: IgnoredUnreadable, reason: unreadable(err)}
		case len(data) > MaxProjectFileBytes:
			pf.unread = &Ignored{File: p, code: IgnoredUnreadable, reason: fmt.Sprintf("it is over %d bytes", MaxProjectFileBytes)}
		default:
			pf.data = data
		}
		return pf
	}
	return nil
}

func unreadable(err error) string {
	if errors.Is(err, unix.ELOOP) {
		return "it is a symbolic link"
	}
	return fmt.Sprintf("it cannot be read (%v)", err)
}

// readFile reads the global settings file into a nested map with lower-case keys. A file in
// which two keys of one table name the same setting is refused (see fold.go).
func readFile(p string) (map[string]any, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("settings: %w", err)
	}
	format := strings.TrimPrefix(filepath.Ext(p), ".")
	if err := ambiguousKeys(format, data); err != nil {
		return nil, fmt.Errorf("settings: %s: %w", p, err)
	}
	fv := viper.New()
	fv.SetConfigType(format)
	if err := fv.ReadConfig(bytes.NewReader(data)); err != nil {
		var pe viper.ConfigParseError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("settings: %s does not parse: %w", p, err)
		}
		return nil, fmt.Errorf("settings: %s: %w", p, err)
	}
	return fv.AllSettings(), nil
}

// flatten turns a nested map into dotted lower-case keys; lists stay whole.
func flatten(prefix string, m map[string]any) map[string]any {
	out := map[string]any{}
	for k, val := range m {
		key := strings.ToLower(k)
		if prefix != "" {
			key = prefix + "." + key
		}
		if sub, ok := val.(map[string]any); ok && len(sub) > 0 {
			for sk, sv := range flatten(key, sub) {
				out[sk] = sv
			}
			continue
		}
		out[key] = val
	}
	return out
}

// nest turns dotted keys back into a nested map.
func nest(flat map[string]any) map[string]any {
	out := map[string]any{}
	keys := make([]string, 0, len(flat))
	for k := range flat {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		parts := strings.Split(k, ".")
		m := out
		for _, p := range parts[:len(parts)-1] {
			sub, ok := m[p].(map[string]any)
			if !ok {
				sub = map[string]any{}
				m[p] = sub
			}
			m = sub
		}
		m[parts[len(parts)-1]] = flat[k]
	}
	return out
}

// asMap is a settings value in its JSON form.
func asMap(s Settings) (map[string]any, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	err = json.Unmarshal(b, &m)
	return m, err
}

// Values is every setting of s by its dotted key as the settings files spell it
// (output.bytes, kernelTransport.docker.image), with its value; a list stays whole. Unlike
// the keys viper is given (flatten: lower case, empty tables kept whole), these are what a
// person reads.
func Values(s Settings) (map[string]any, error) {
	m, err := asMap(s)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if prefix != "" {
				k = prefix + "." + k
			}
			if sub, ok := v.(map[string]any); ok {
				walk(k, sub)
				continue
			}
			out[k] = v
		}
	}
	walk("", m)
	return out, nil
}

// flatMap is a settings value as dotted keys, through its JSON form.
func flatMap(s Settings) (map[string]any, error) {
	m, err := asMap(s)
	if err != nil {
		return nil, err
	}
	out := flatten("", m)
	for k, val := range out {
		if val == nil || (reflect.ValueOf(val).Kind() == reflect.Slice && reflect.ValueOf(val).Len() == 0) {
			delete(out, k)
		}
	}
	return out, nil
}
