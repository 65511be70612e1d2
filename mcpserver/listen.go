package mcpserver

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paddockhq/paddock/daemon"
	"github.com/paddockhq/paddock/errdefs"
)

// Endpoint is the path streamable HTTP is served at.
const Endpoint = "/mcp"

// TokenEnv names the variable that gives the bearer token of a loopback listener.
const TokenEnv = "PADDOCK_MCP_TOKEN"

// Serve serves x until the client leaves or ctx ends: on standard input and output when
// listen is "", else streamable HTTP on listen (ServeHTTP). Where it serves, and a token it
// made, are told on diag.
func (x *Server) Serve(ctx context.Context, listen string, diag io.Writer) error {
	var err error
	if listen != "" {
		err = x.ServeHTTP(ctx, listen, diag)
	} else {
		err = x.Run(ctx, &mcp.StdioTransport{})
	}
	if err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// ServeHTTP serves x over streamable HTTP at listen until ctx ends: a unix socket
// (unix://PATH, with the daemon's checks: a directory of the user's, 0600, peers of the
// same uid), or a loopback address where every request carries the bearer token (TokenEnv,
// else one made and told on diag). Any other address is refused (CheckListen).
func (x *Server) ServeHTTP(ctx context.Context, listen string, diag io.Writer) error {
	if err := CheckListen(listen); err != nil {
		return err
	}
	defer x.Close()
	var l net.Listener
	h := x.Handler()
	if path, ok := strings.CutPrefix(listen, "unix://"); ok {
		var err error
		if l, err = daemon.Listen(path, nil); err != nil {
			return err
		}
		fmt.Fprintf(diag, "paddock: serving MCP on unix://%s (path %s)\n", path, Endpoint)
	} else {
		token := os.Getenv(TokenEnv)
		if token == "" {
			var b [32]byte
			if _, err := rand.Read(b[:]); err != nil {
				return err
			}
			token = hex.EncodeToString(b[:])
			fmt.Fprintf(diag, "paddock: MCP bearer token: %s\n", token)
		}
		var err error
		if l, err = net.Listen("tcp", listen); err != nil {
			return err
		}
		h = bearer(token, h)
		fmt.Fprintf(diag, "paddock: serving MCP on http://%s%s\n", l.Addr(), Endpoint)
	}
	mux := http.NewServeMux()
	mux.Handle(Endpoint, h)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		hs.Close()
	}()
	if err := hs.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// CheckListen refuses a listen address that is neither a unix socket nor a loopback
// address, before anything is opened.
func CheckListen(listen string) error {
	if listen == "" || strings.HasPrefix(listen, "unix://") {
		return nil
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return errdefs.New(errdefs.InvalidArgument, "bad_listen", fmt.Sprintf("--listen %q: unix://PATH or HOST:PORT", listen))
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return errdefs.New(errdefs.InvalidArgument, "bad_listen", fmt.Sprintf("--listen %q: only a loopback address or a unix socket is served", listen))
	}
	return nil
}

// bearer lets through only the requests that carry the token (compared in constant time).
func bearer(token string, h http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="paddock"`)
			http.Error(w, "a bearer token is needed", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
