package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
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
}

// Loaded is the outcome of Load.
type Loaded struct {
	Settings Settings
	// Files are the settings files read, global first.
	Files []string
	// Sources says where each key's value came from: "flag --name", "env NAME", a file's
	// path, or "default".
	Sources map[string]string
	// Warnings name what was ignored, e.g. a trusted key in a project's settings.
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
func Load(o Options) (*Loaded, error) {
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
	if o.Workspace != "" {
		if p := find(filepath.Join(o.Workspace, ".paddock")); p != "" {
			all, err := readFile(p)
			if err != nil {
				return nil, err
			}
			project = map[string]any{}
			for k, val := range flatten("", all) {
				if ProjectMay(k) {
					project[k] = val
				} else {
					l.Warnings = append(l.Warnings, fmt.Sprintf("%s: %s is ignored: a project's settings cannot set it; set it in %s", p, k, filepath.Join(Dir(), "settings.yaml")))
				}
			}
			l.Files = append(l.Files, p)
			if err := v.MergeConfigMap(nest(project)); err != nil {
				return nil, err
			}
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
		if f := o.Flags.Lookup(name); f != nil {
			if err := v.BindPFlag(key, f); err != nil {
				return nil, err
			}
		}
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
		if f := o.Flags.Lookup(name); f != nil && f.Changed {
			flagOf[strings.ToLower(key)] = "flag --" + name
		}
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

func has(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}

// readFile reads one settings file into a nested map with lower-case keys.
func readFile(p string) (map[string]any, error) {
	fv := viper.New()
	fv.SetConfigFile(p)
	if err := fv.ReadInConfig(); err != nil {
		var pe viper.ConfigParseError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("settings: %s does not parse: %w", p, err)
		}
		return nil, fmt.Errorf("settings: %w", err)
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

// flatMap is a settings value as dotted keys, through its JSON form.
func flatMap(s Settings) (map[string]any, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
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
