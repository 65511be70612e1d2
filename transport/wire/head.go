package wire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// Head is what the gate reads of a frame: its leading small fields.
type Head struct {
	Event  string
	ID     string
	Type   string
	Status string
	Step   int
	FD     int
	// Rest is the offset in the line of the first member after the head (its comma), or
	// -1 when the head ran to the end of what was read.
	Rest int
}

// ReadHead reads the head of a line: the leading `event`, `id`, `type`, `status`, `step` and
// `fd` members of its object, stopping at the first other member or where the head ends. A
// head that is not UTF-8, does not open an object, or has no `event` is a ProtocolFault.
// complete says whether head is the whole line; a cut head may end mid-value.
//
// The head is scanned by hand: encoding/json has no way to read a prefix of a document
// without buffering and allocating per token, and the gate reads one head per frame.
func ReadHead(head []byte, complete bool) (Head, error) {
	if !complete {
		// A head cut inside a multi-byte character is still a head.
		for i := 0; i < utf8.UTFMax && len(head) > 0; i++ {
			if r, _ := utf8.DecodeLastRune(head); r != utf8.RuneError {
				break
			}
			head = head[:len(head)-1]
		}
	}
	if !utf8.Valid(head) {
		return Head{}, &ProtocolFault{Reason: "not UTF-8"}
	}
	h := Head{Rest: -1}
	sc := scanner{b: head}
	sc.space()
	if !sc.byte('{') {
		return Head{}, &ProtocolFault{Reason: "not a frame"}
	}
	for first := true; ; first = false {
		start := sc.i
		sc.space()
		if !first && !sc.byte(',') {
			if sc.i < len(sc.b) { // the object closes, or a malformed member
				h.Rest = start
			}
			break
		}
		sc.space()
		key, ok := sc.str()
		if !ok {
			h.Rest = start
			break
		}
		sc.space()
		if !sc.byte(':') {
			break
		}
		sc.space()
		switch key {
		case "event", "id", "type", "status":
			if sc.i < len(sc.b) && sc.b[sc.i] != '"' {
				return Head{}, &ProtocolFault{Reason: "not a frame: " + key + " is not a string"}
			}
			v, ok := sc.str()
			if !ok {
				goto done // cut mid-value
			}
			switch key {
			case "event":
				h.Event = v
			case "id":
				h.ID = v
			case "type":
				h.Type = v
			case "status":
				h.Status = v
			}
		case "step", "fd":
			n, ok, bad := sc.int()
			if bad {
				return Head{}, &ProtocolFault{Reason: "not a frame: " + key + " is not an integer"}
			}
			if !ok {
				goto done
			}
			if key == "step" {
				h.Step = n
			} else {
				h.FD = n
			}
		default:
			h.Rest = start
			goto done
		}
	}
done:
	if h.Event == "" {
		return Head{}, &ProtocolFault{Reason: "not a frame: no event in its head"}
	}
	return h, nil
}

// scanner reads JSON tokens from a byte slice.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

func (s *scanner) byte(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str reads a JSON string; ok is false when there is none or it is cut.
func (s *scanner) str() (string, bool) {
	if !s.byte('"') {
		return "", false
	}
	start := s.i
	escaped := false
	for j := start; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '\\':
			escaped = true
			j++
		case c == '"':
			s.i = j + 1
			if !escaped {
				return string(s.b[start:j]), true
			}
			var v string
			if json.Unmarshal(s.b[start-1:j+1], &v) != nil {
				return "", false
			}
			return v, true
		case c < 0x20:
			return "", false
		}
	}
	return "", false
}

// int reads a JSON integer; ok is false when it is cut, bad when it is not an integer.
func (s *scanner) int() (n int, ok, bad bool) {
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	if s.i == len(s.b) {
		return 0, false, false // cut: the number may go on
	}
	if c := s.b[s.i]; c == '.' || c == 'e' || c == 'E' || s.i == start {
		return 0, false, true
	}
	n, err := strconv.Atoi(string(s.b[start:s.i]))
	return n, err == nil, err != nil
}

// Member returns the raw value of the member named key that follows a frame's head, when the
// frame has the form the wire writes (head, then that member last); ok is false otherwise,
// and the caller decodes the whole frame instead.
func Member(line []byte, h Head, key string) (raw []byte, ok bool) {
	if h.Rest < 0 || h.Rest >= len(line) {
		return nil, false
	}
	rest := line[h.Rest:]
	prefix := `,"` + key + `":`
	if !bytes.HasPrefix(rest, []byte(prefix)) {
		return nil, false
	}
	v := bytes.TrimRight(rest[len(prefix):], " \t\r")
	if len(v) < 2 || v[len(v)-1] != '}' {
		return nil, false
	}
	return v[:len(v)-1], true
}

// StreamData returns the bytes of a stream frame. Frames as the wire writes them (data last,
// base64) are decoded without a JSON parser; any other form is decoded whole.
func StreamData(line []byte, h Head) ([]byte, error) {
	if raw, ok := Member(line, h, "data"); ok && len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		enc := raw[1 : len(raw)-1]
		if bytes.IndexByte(enc, '\\') < 0 {
			out := make([]byte, base64.StdEncoding.DecodedLen(len(enc)))
			n, err := base64.StdEncoding.Decode(out, enc)
			if err == nil {
				return out[:n], nil
			}
		}
	}
	f, err := Decode(line)
	if err != nil {
		return nil, err
	}
	return f.Data, nil
}
