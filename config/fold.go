package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"

	toml "github.com/pelletier/go-toml/v2"
	yaml "go.yaml.in/yaml/v3"
)

// The global settings file is trusted and read as viper reads it: keys lower-cased, then
// matched to settings with Unicode case folding. Two keys of one table that fold to the same
// name ("kind" and "Kind", "ssh" and "ſsh") would then both name one setting, and which one
// wins depends on the order a Go map is walked. So such a file is refused, naming both keys:
// a trusted file's value is never a guess.

// ErrAmbiguous is the class of a settings file in which two keys of one table name the same
// setting.
var ErrAmbiguous = errors.New("two keys name the same setting")

// foldKey is s with each character replaced by the least of its Unicode case-fold orbit: two
// keys have the same foldKey exactly when strings.EqualFold says they are equal.
func foldKey(s string) string {
	var b strings.Builder
	for _, r := range s {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}

// folds collects a table's keys and reports the first two that fold together.
type folds map[string]string

func (f folds) add(path, key string) error {
	k := foldKey(key)
	if prev, ok := f[k]; ok {
		return fmt.Errorf("%w: %s and %s", ErrAmbiguous, strconv.QuoteToASCII(join(path, prev)), strconv.QuoteToASCII(join(path, key)))
	}
	f[k] = key
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// ambiguousKeys reports two keys of one table in data (a settings file in format) that name
// the same setting, at any depth, lists included. A file that does not parse is left to the
// reader, which says so.
func ambiguousKeys(format string, data []byte) error {
	switch format {
	case "yaml", "yml":
		var doc yaml.Node
		if yaml.Unmarshal(data, &doc) != nil {
			return nil
		}
		return yamlFolds(&doc, "")
	case "json":
		dec := json.NewDecoder(bytes.NewReader(data))
		if err := jsonFolds(dec, ""); errors.Is(err, ErrAmbiguous) {
			return err
		}
		return nil
	case "toml":
		var m map[string]any
		if toml.Unmarshal(data, &m) != nil {
			return nil
		}
		return tomlFolds(m, "")
	}
	return nil
}

// yamlFolds walks n; an alias is walked where its anchor is, and a merge key's table is
// YAML's own rule (its keys under the table's own).
func yamlFolds(n *yaml.Node, path string) error {
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			if err := yamlFolds(c, path); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		seen := folds{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind == yaml.ScalarNode && k.Tag != "!!merge" {
				if err := seen.add(path, k.Value); err != nil {
					return err
				}
			}
			if err := yamlFolds(n.Content[i+1], join(path, k.Value)); err != nil {
				return err
			}
		}
	}
	return nil
}

func jsonFolds(dec *json.Decoder, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		seen := folds{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := k.(string)
			if err := seen.add(path, key); err != nil {
				return err
			}
			if err := jsonFolds(dec, join(path, key)); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	case json.Delim('['):
		for dec.More() {
			if err := jsonFolds(dec, path); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	}
	return nil
}

func tomlFolds(x any, path string) error {
	switch t := x.(type) {
	case map[string]any:
		seen := folds{}
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if err := seen.add(path, k); err != nil {
				return err
			}
			if err := tomlFolds(t[k], join(path, k)); err != nil {
				return err
			}
		}
	case []any:
		for _, v := range t {
			if err := tomlFolds(v, path); err != nil {
				return err
			}
		}
	}
	return nil
}
