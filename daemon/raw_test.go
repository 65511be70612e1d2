package daemon_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// rawRequest makes one HTTP request over a unix socket without the client package.
func rawRequest(t *testing.T, socket, method, path string) (int, string) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
	defer hc.CloseIdleConnections()
	var body io.Reader
	if method == "POST" {
		body = strings.NewReader("{}")
	}
	req, _ := http.NewRequest(method, "http://paddock"+path, body)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
