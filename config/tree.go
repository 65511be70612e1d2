package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"

	toml "github.com/pelletier/go-toml/v2"
	yaml "go.yaml.in/yaml/v3"
)

// A settings file as the project decoder reads it: tables with their keys exactly as written,
// in the order written, every repeat kept, whatever the format. The formats' own decoders into
// Go types match keys with Unicode case folding (encoding/json, mapstructure) and drop or
// refuse repeats; here the keys are compared by the decoder itself (see project.go).

type valueKind uint8

const (
	mapValue valueKind = iota
	listValue
	textValue
	intValue
	numberValue // a number that is not a whole number of 64 bits
	boolValue
	nullValue
	otherValue // a date, a YAML tag of its own, a table too deep to hold a setting
)

// value is one value of a settings file. Only tables at levels up to mapDepth keep their
// fields; a list keeps nothing, since no project key takes one.
type value struct {
	kind   valueKind
	text   string // textValue: the text; other scalars: as written
	n      int64  // intValue
	fields []field
}

// field is one key of a table and its value.
type field struct {
	key   string
	merge bool // a YAML merge key (<<)
	val   *value
}

// String describes v for a message: its kind, and a scalar's value (quoted, escaped, cut).
func (v *value) String() string {
	const most = 40
	quote := func(s string) string {
		if len(s) > most {
			s = s[:most] + "..."
		}
		return strconv.QuoteToASCII(s)
	}
	switch v.kind {
	case mapValue:
		return "a table"
	case listValue:
		return "a list"
	case textValue:
		return "the text " + quote(v.text)
	case intValue, numberValue:
		return "the number " + quote(v.text)
	case boolValue:
		return v.text
	case nullValue:
		return "null"
	}
	return "a value of another kind"
}

var (
	errTooMany  = fmt.Errorf("it holds more than %d values", maxProjectValues)
	errManyDocs = errors.New("it holds more than one YAML document")
)

// parseSettings reads data in format (json, yaml, yml, toml) into its top value; nil when
// the file holds none. A panic in a format's parser is an error like any other: the bytes
// are a project's, and a flaw in a parser must not take the host's command down.
func parseSettings(format string, data []byte) (v *value, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, fmt.Errorf("it does not parse as %s (%v)", format, r)
		}
	}()
	budget := maxProjectValues
	switch format {
	case "json":
		v, err = parseJSON(data, &budget)
	case "yaml", "yml":
		v, err = parseYAML(data, &budget)
	case "toml":
		v, err = parseTOML(data, &budget)
	default:
		return nil, fmt.Errorf("settings in %q are not read (json, yaml, yml or toml)", format)
	}
	if err != nil && !errors.Is(err, errTooMany) && !errors.Is(err, errManyDocs) {
		err = fmt.Errorf("it does not parse as %s: %w", format, err)
	}
	return v, err
}

// spend takes one value from the budget.
func spend(budget *int) error {
	if *budget--; *budget < 0 {
		return errTooMany
	}
	return nil
}

func parseYAML(data []byte, budget *int) (*value, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return nil, nil
		}
		return nil, err
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, errManyDocs
	case err != io.EOF:
		return nil, err
	}
	return fromYAML(&doc, 0, budget)
}

// fromYAML follows aliases: each use of an anchor is read again, within the budget.
func fromYAML(n *yaml.Node, level int, budget *int) (*value, error) {
	if err := spend(budget); err != nil {
		return nil, err
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return fromYAML(n.Content[0], level, budget)
	case yaml.AliasNode:
		if n.Alias == nil {
			return &value{kind: otherValue}, nil
		}
		return fromYAML(n.Alias, level, budget)
	case yaml.SequenceNode:
		return &value{kind: listValue}, nil
	case yaml.MappingNode:
		v := &value{kind: mapValue}
		if level > mapDepth {
			return &value{kind: otherValue}, nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			for k.Kind == yaml.AliasNode && k.Alias != nil {
				k = k.Alias
			}
			f := field{key: k.Value, merge: k.Kind == yaml.ScalarNode && k.Tag == "!!merge"}
			if k.Kind != yaml.ScalarNode {
				f.key = "(a key that is not text)"
			}
			val, err := fromYAML(n.Content[i+1], level+1, budget)
			if err != nil {
				return nil, err
			}
			f.val = val
			v.fields = append(v.fields, f)
		}
		return v, nil
	case yaml.ScalarNode:
		v := &value{text: n.Value}
		switch n.ShortTag() {
		case "!!str":
			v.kind = textValue
		case "!!int":
			v.kind = numberValue
			if n.Decode(&v.n) == nil {
				v.kind = intValue
			}
		case "!!float":
			v.kind = numberValue
		case "!!bool":
			v.kind = boolValue
		case "!!null":
			v.kind = nullValue
		default:
			v.kind = otherValue
		}
		return v, nil
	}
	return &value{kind: otherValue}, nil
}

func parseJSON(data []byte, budget *int) (*value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := fromJSON(dec, 0, budget)
	if err == io.EOF {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			err = errors.New("more follows the top value")
		}
		return nil, err
	}
	return v, nil
}

// fromJSON reads the next value from dec. What no project key can be (a list's items, a table
// deeper than mapDepth) is read through and not kept.
func fromJSON(dec *json.Decoder, level int, budget *int) (*value, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if err := spend(budget); err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' || level > mapDepth {
			if err := skipJSON(dec, budget); err != nil {
				return nil, err
			}
			if t == '[' {
				return &value{kind: listValue}, nil
			}
			return &value{kind: otherValue}, nil
		}
		v := &value{kind: mapValue}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, unexpectedEOF(err)
			}
			key, _ := k.(string)
			val, err := fromJSON(dec, level+1, budget)
			if err != nil {
				return nil, unexpectedEOF(err)
			}
			v.fields = append(v.fields, field{key: key, val: val})
		}
		if _, err := dec.Token(); err != nil { // the closing brace
			return nil, unexpectedEOF(err)
		}
		return v, nil
	case string:
		return &value{kind: textValue, text: t}, nil
	case json.Number:
		v := &value{kind: numberValue, text: t.String()}
		if n, err := t.Int64(); err == nil {
			v.kind, v.n = intValue, n
		}
		return v, nil
	case bool:
		return &value{kind: boolValue, text: strconv.FormatBool(t)}, nil
	case nil:
		return &value{kind: nullValue, text: "null"}, nil
	}
	return &value{kind: otherValue}, nil
}

// skipJSON reads through the rest of a list or table whose opening delimiter was read,
// without recursion, however deep it nests.
func skipJSON(dec *json.Decoder, budget *int) error {
	for depth := 1; depth > 0; {
		tok, err := dec.Token()
		if err != nil {
			return unexpectedEOF(err)
		}
		if err := spend(budget); err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

// unexpectedEOF is err, but an end of input inside a value is not the end of an empty file.
func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func parseTOML(data []byte, budget *int) (*value, error) {
	var m map[string]any
	if err := toml.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	return fromTOML(m, 0, budget)
}

// fromTOML reads a decoded TOML value. TOML refuses a key given twice and makes dotted keys
// and inline tables into tables; a table's keys come in sorted order (TOML's are unordered).
func fromTOML(x any, level int, budget *int) (*value, error) {
	if err := spend(budget); err != nil {
		return nil, err
	}
	switch t := x.(type) {
	case map[string]any:
		if level > mapDepth {
			return &value{kind: otherValue}, nil
		}
		v := &value{kind: mapValue}
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range t {
				if !yield(k) {
					return
				}
			}
		}) {
			val, err := fromTOML(t[k], level+1, budget)
			if err != nil {
				return nil, err
			}
			v.fields = append(v.fields, field{key: k, val: val})
		}
		return v, nil
	case []any:
		return &value{kind: listValue}, nil
	case string:
		return &value{kind: textValue, text: t}, nil
	case int64:
		return &value{kind: intValue, n: t, text: strconv.FormatInt(t, 10)}, nil
	case float64:
		return &value{kind: numberValue, text: strconv.FormatFloat(t, 'g', -1, 64)}, nil
	case bool:
		return &value{kind: boolValue, text: strconv.FormatBool(t)}, nil
	}
	return &value{kind: otherValue}, nil
}
