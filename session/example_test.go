package session_test

import (
	"context"
	"fmt"
	"log"

	"github.com/paddockhq/paddock/config"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/session"
)

// A session opened as paddock run opens one, a script run in it, and its transport finished:
// a workspace synced to a box comes back at Finish. (Compiled, not run: it needs a sandbox.)
func ExampleOpen() {
	ctx := context.Background()
	dir := "/path/to/workspace"
	l, err := session.Load(config.Options{Workspace: dir})
	if err != nil {
		log.Fatal(err)
	}
	s, p, err := session.Open(ctx, session.Options{Workspace: dir, Settings: l, AuditFile: session.AuditFile()})
	if err != nil {
		log.Fatal(err)
	}
	res, err := s.Run(ctx, orchestrator.Call{Script: "go test ./..."})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(res)
	s.Close()
	if handback, err := p.Finish(ctx); err != nil || handback != nil {
		fmt.Println(handback, err)
	}
}
