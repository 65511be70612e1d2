//go:build linux

package kernel

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/paddockhq/paddock/transport/wire"
)

// Exit codes of the host client.
const (
	HostOK          = 0 // the host replied ok; its body is on standard output
	HostRefused     = 1 // the host replied with an error, printed as CODE: MESSAGE
	HostUsage       = 2 // the command line is wrong
	HostUnreachable = 3 // the host socket cannot be reached
)

const hostUsage = `usage: paddock-kernel host TYPE [JSON|-]

Sends one request to the host through $` + HostSocketEnv + ` and prints the reply's body.
JSON is the request's body ("-": read it from standard input; none: no body).
Exit: 0 ok, 1 the host refused (CODE: MESSAGE on stderr), 2 usage, 3 no socket.
`

// HostClient is `paddock-kernel host TYPE [JSON]`, the host socket's client for scripts in
// the sandbox. It returns the exit code.
func HostClient(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) < 1 || len(args) > 2 || args[0] == "" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stderr, hostUsage)
		return HostUsage
	}
	req := request{Type: args[0]}
	if len(args) == 2 {
		b := []byte(args[1])
		if args[1] == "-" {
			var err error
			if b, err = io.ReadAll(stdin); err != nil {
				fmt.Fprintln(stderr, "paddock-kernel host: reading the body:", err)
				return HostUsage
			}
		}
		if !json.Valid(b) {
			fmt.Fprintln(stderr, "paddock-kernel host: the body is not JSON")
			return HostUsage
		}
		req.Body = b
	}
	path := os.Getenv(HostSocketEnv)
	if path == "" {
		fmt.Fprintln(stderr, "paddock-kernel host: $"+HostSocketEnv+" is not set")
		return HostUnreachable
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		fmt.Fprintln(stderr, "paddock-kernel host:", err)
		return HostUnreachable
	}
	defer c.Close()
	line, err := json.Marshal(req)
	if err != nil {
		fmt.Fprintln(stderr, "paddock-kernel host:", err)
		return HostUsage
	}
	if _, err := c.Write(append(line, '\n')); err != nil {
		fmt.Fprintln(stderr, "paddock-kernel host:", err)
		return HostUnreachable
	}
	got, err := wire.NewReader(c).Next()
	if err == nil && got.Oversize() {
		err = errors.New("reply over the line limit")
	}
	if err != nil {
		fmt.Fprintln(stderr, "paddock-kernel host: no reply:", err)
		return HostUnreachable
	}
	f, err := wire.Decode(got.Bytes)
	if err != nil {
		fmt.Fprintln(stderr, "paddock-kernel host:", err)
		return HostUnreachable
	}
	if f.Status != wire.StatusOK {
		code, msg := f.Status, "the host refused the request"
		if f.Error != nil {
			code, msg = f.Error.Code, f.Error.Message
		}
		fmt.Fprintf(stderr, "%s: %s\n", code, msg)
		return HostRefused
	}
	b := []byte(f.Body)
	if len(b) == 0 {
		b = []byte("null")
	}
	stdout.Write(append(b, '\n'))
	return HostOK
}
