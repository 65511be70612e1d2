//go:build linux

package kernel

import (
	"encoding/json"
	"testing"

	"github.com/paddockhq/paddock/transport/wire"
)

// The first line of a connection to a listening kernel is taken only as an attach frame with
// a well-formed nonce, and its answer to the challenge only as a prove frame with the proof
// the kernel expects; nothing else, however malformed, gets further.
func FuzzAttachLines(f *testing.F) {
	const nonce = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	want := wire.Proof("the-key", wire.ProofHost, nonce, nonce)
	f.Add([]byte(`{"event":"attach","body":{"nonce":"` + nonce + `"}}`))
	f.Add([]byte(`{"event":"attach","body":{"nonce":"` + nonce[:63] + `"}}`))
	f.Add([]byte(`{"event":"attach","body":{"key":"the-key"}}`))
	f.Add([]byte(`{"event":"prove","body":{"proof":"` + want + `"}}`))
	f.Add([]byte(`{"event":"prove","body":{"proof":"` + want + `","proof":"x"}}`))
	f.Add([]byte(`{"event":"request","id":"1","type":"exec","body":{"nonce":"` + nonce + `"}}`))
	f.Add([]byte(`{"event":"attach","body":"x"}`))
	f.Add([]byte(`{"event":"prove"}`))
	f.Add([]byte("\xff"))
	f.Fuzz(func(t *testing.T, line []byte) {
		// The oracle: encoding/json's reading of the whole line.
		var fr struct {
			Event string `json:"event"`
			Body  struct {
				Nonce *string `json:"nonce"`
				Proof *string `json:"proof"`
			} `json:"body"`
		}
		decoded := json.Unmarshal(line, &fr) == nil
		if n, ok := attachNonce(line); ok {
			if !decoded || fr.Event != wire.EventAttach || fr.Body.Nonce == nil || *fr.Body.Nonce != n || !wire.ValidNonce(n) {
				t.Fatalf("%q attached with nonce %q", line, n)
			}
		}
		if proves(line, want) && (!decoded || fr.Event != wire.EventProve || fr.Body.Proof == nil || *fr.Body.Proof != want) {
			t.Fatalf("%q proved the key", line)
		}
	})
}
