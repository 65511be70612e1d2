package mcpserver

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/paddockhq/paddock/errdefs"
)

// Only a unix socket or a loopback address is served; anything else is refused before
// anything opens, as an invalid argument.
func TestCheckListen(t *testing.T) {
	t.Parallel()
	for listen, ok := range map[string]bool{
		"": true, "unix:///tmp/x.sock": true, "127.0.0.1:0": true, "[::1]:8080": true, "localhost:9": true,
		"0.0.0.0:80": false, "192.0.2.1:80": false, "example.com:80": false, ":8080": false, "127.0.0.1": false, "tcp://127.0.0.1:1": false,
	} {
		err := CheckListen(listen)
		if (err == nil) != ok {
			t.Errorf("%q: %v", listen, err)
		}
		if c, _ := errdefs.Of(err); err != nil && c != errdefs.InvalidArgument {
			t.Errorf("%q: class %v", listen, c)
		}
	}
}

// A request without the bearer token, or with another, never reaches the server.
func TestBearer(t *testing.T) {
	t.Parallel()
	h := bearer("s3cret", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	for auth, want := range map[string]int{"": 401, "Bearer other": 401, "Bearer s3cre": 401, "bearer s3cret": 401, "Bearer s3cret": 204} {
		r := httptest.NewRequest("POST", "/mcp", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("%q: %d, want %d", auth, w.Code, want)
		}
	}
}
