package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/orchestrator"
)

// What the CLI prints of the records a daemon sends. A record can lack any part (a lost
// job has no result, an event only the part its kind names), so each function here prints
// what there is and never assumes the rest: FuzzDaemonRecords holds them to it.

// resultText is a result as run prints it.
func resultText(r *api.Result) string {
	if r == nil {
		return "[no result recorded]\n"
	}
	return orchestrator.ResultOf(r).String()
}

// resultStatus is the exit status a result gives the CLI.
func resultStatus(r *api.Result) int {
	if r == nil {
		return 1
	}
	return r.End.Status
}

// printJobs prints a listing of jobs.
func printJobs(w io.Writer, jobs []api.Job) {
	fmt.Fprintln(w, "JOB\tSTATE\tSCRIPT")
	for _, j := range jobs {
		fmt.Fprintf(w, "%s\t%s\t%s\n", j.ID, j.State(), strings.ReplaceAll(j.Script, "\n", "; "))
	}
}

// printSessions prints a listing of sessions.
func printSessions(w io.Writer, ss []api.Session) {
	fmt.Fprintln(w, "SESSION\tSTATE\tTRANSPORT\tJOBS\tPARENT\tWORKSPACE")
	for _, s := range ss {
		parent := s.Parent
		if parent == "" {
			parent = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\n", s.ID, s.State, s.Transport, len(s.Jobs), parent, s.Workspace)
	}
}

// printEvent prints an event of a session's stream that is not a question: output to out
// or errOut by its descriptor, a job's end and the session's close to errOut.
func printEvent(e api.Event, id string, out, errOut io.Writer) {
	switch e.Kind {
	case api.EventOutput:
		if e.Output == nil {
			return
		}
		io.WriteString(byFD(e.Output.FD, out, errOut), e.Output.Data)
	case api.EventJobEnd:
		if e.Job == nil {
			return
		}
		end := "[ended]"
		switch {
		case e.Job.Lost:
			end = "[lost]"
		case e.Job.Result != nil:
			end = orchestrator.EndOf(e.Job.Result.End).String()
		}
		fmt.Fprintf(errOut, "paddock: job %s: %s\n", e.Job.ID, end)
	case api.EventClosed:
		fmt.Fprintf(errOut, "paddock: session %s closed\n", id)
	}
}
