package daemon

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"time"

	"github.com/paddockhq/paddock/config"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/errdefs"
	"github.com/paddockhq/paddock/orchestrator"
)

// OpenAPI is the API's OpenAPI document, committed beside the code and served at
// /openapi.json.
//
//go:embed openapi.json
var OpenAPI []byte

// maxBody bounds a request's body.
const maxBody = 64 << 20

func (s *Server) routes() {
	h := map[string]http.HandlerFunc{
		"GET /v1/health":                                     s.health,
		"GET /v1/sessions":                                   s.list,
		"POST /v1/sessions":                                  s.create,
		"GET /v1/sessions/{id}":                              s.inspect,
		"DELETE /v1/sessions/{id}":                           s.remove,
		"POST /v1/sessions/{id}/bash":                        s.runBash,
		"POST /v1/sessions/{id}/fs/read":                     s.fsHandler(orchestrator.TypeFSRead),
		"POST /v1/sessions/{id}/fs/write":                    s.fsHandler(orchestrator.TypeFSWrite),
		"POST /v1/sessions/{id}/fs/edit":                     s.fsHandler(orchestrator.TypeFSEdit),
		"POST /v1/sessions/{id}/fs/stat":                     s.fsHandler(orchestrator.TypeFSStat),
		"POST /v1/sessions/{id}/fs/list":                     s.fsHandler(orchestrator.TypeFSList),
		"POST /v1/sessions/{id}/fs/glob":                     s.fsHandler(orchestrator.TypeFSGlob),
		"POST /v1/sessions/{id}/fs/grep":                     s.fsHandler(orchestrator.TypeFSGrep),
		"GET /v1/sessions/{id}/children":                     s.children,
		"POST /v1/sessions/{id}/children":                    s.spawnChild,
		"POST /v1/sessions/{id}/children/{child}/collect":    s.collect,
		"POST /v1/sessions/{id}/questions/{question}/answer": s.answer,
		"GET /v1/sessions/{id}/jobs":                         s.jobs,
		"GET /v1/sessions/{id}/jobs/{job}":                   s.job,
		"POST /v1/sessions/{id}/jobs/{job}/wait":             s.waitJob,
		"POST /v1/sessions/{id}/jobs/{job}/kill":             s.killJob,
		"GET /v1/sessions/{id}/events":                       s.events,
		"POST /v1/settings":                                  s.settings,
		"GET /metrics":                                       s.serveMetrics,
		"GET /openapi.json":                                  s.openapi,
	}
	s.mux = http.NewServeMux()
	for _, r := range api.Routes {
		f := h[r.Method+" "+r.Pattern]
		if f == nil {
			panic("daemon: no handler for " + r.Method + " " + r.Pattern)
		}
		s.mux.HandleFunc(r.Method+" "+r.Pattern, f)
	}
	if len(h) != len(api.Routes) {
		panic("daemon: a handler is not in api.Routes")
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeErr(w, &orchestrator.NotFoundError{What: "route", ID: r.Method + " " + r.URL.Path})
	})
}

// settings answers what a session opened with the request would have of each setting.
func (s *Server) settings(w http.ResponseWriter, r *http.Request) {
	var req api.OpenRequest
	if err := readJSON(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	if s.cfg.Settings == nil {
		writeJSON(w, http.StatusNotImplemented, api.Error{Code: "not_implemented", Message: "this daemon cannot show its settings"})
		return
	}
	out, err := s.cfg.Settings(r.Context(), req)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.Encode(v)
}

// status is an error's HTTP status and code: its class's status (errdefs.HTTPStatus, the
// one table) and its stable code.
func status(err error) (int, string) {
	c, code := errdefs.Of(err)
	return errdefs.HTTPStatus(c), code
}

func writeErr(w http.ResponseWriter, err error) {
	st, code := status(err)
	writeJSON(w, st, api.Error{Code: code, Message: err.Error()})
}

func readJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return &badRequest{msg: "request body: " + err.Error()}
	}
	return nil
}

func (s *Server) entry(w http.ResponseWriter, r *http.Request) *entry {
	e, err := s.get(r.PathValue("id"))
	if err != nil {
		writeErr(w, err)
		return nil
	}
	return e
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, 200, api.Health{Version: s.cfg.Version, PID: os.Getpid(), Uptime: time.Since(s.start).Seconds()})
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	es := make([]*entry, 0, len(s.sessions))
	for _, e := range s.sessions {
		es = append(es, e)
	}
	s.mu.Unlock()
	out := make([]api.Session, 0, len(es))
	for _, e := range es {
		out = append(out, s.describe(e))
	}
	sort.Slice(out, func(a, b int) bool {
		if !out[a].Created.Equal(out[b].Created) {
			return out[a].Created.Before(out[b].Created)
		}
		return out[a].ID < out[b].ID
	})
	writeJSON(w, 200, out)
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var req api.OpenRequest
	if err := readJSON(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	e, err := s.open(r.Context(), req)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.describe(e))
}

func (s *Server) inspect(w http.ResponseWriter, r *http.Request) {
	if e := s.entry(w, r); e != nil {
		writeJSON(w, 200, s.describe(e))
	}
}

func (s *Server) remove(w http.ResponseWriter, r *http.Request) {
	info, err := s.closeSession(r.PathValue("id"))
	if err != nil && info.ID == "" {
		writeErr(w, err)
		return
	}
	if err != nil {
		info.Warnings = append(info.Warnings, err.Error())
	}
	writeJSON(w, 200, info)
}

func (s *Server) runBash(w http.ResponseWriter, r *http.Request) {
	e := s.entry(w, r)
	if e == nil {
		return
	}
	var req api.BashRequest
	if err := readJSON(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	res, art, cwd, err := s.bash(r.Context(), e, req)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, 200, api.BashResponse{Result: res.API(), Artifact: art, Cwd: cwd})
}

func (s *Server) fsHandler(typ string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		e := s.entry(w, r)
		if e == nil {
			return
		}
		if e.s == nil {
			writeErr(w, &stateError{ID: e.info.ID})
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
		if err != nil {
			writeErr(w, &badRequest{msg: err.Error()})
			return
		}
		out, err := e.s.Serve(r.Context(), typ, body)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, 200, out)
	}
}

func (s *Server) children(w http.ResponseWriter, r *http.Request) {
	e := s.entry(w, r)
	if e == nil {
		return
	}
	e.mu.Lock()
	ids := append([]string(nil), e.children...)
	e.mu.Unlock()
	out := []api.Session{}
	for _, id := range ids {
		if c, err := s.get(id); err == nil {
			out = append(out, s.describe(c))
		}
	}
	writeJSON(w, 200, out)
}

func (s *Server) spawnChild(w http.ResponseWriter, r *http.Request) {
	e := s.entry(w, r)
	if e == nil {
		return
	}
	var req api.SpawnRequest
	if err := readJSON(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	if req.Script != "" {
		if e.s == nil {
			writeErr(w, &stateError{ID: e.info.ID})
			return
		}
		id, err := e.s.SpawnRun(r.Context(), orchestrator.ChildConfig{Name: req.Name, Workspace: req.Workspace, Env: req.Env}, req.Script)
		if err != nil {
			writeErr(w, err)
			return
		}
		mode := req.Workspace
		if mode == "" {
			mode = orchestrator.Shared
		}
		writeJSON(w, http.StatusCreated, api.Session{ID: id, State: api.Open, Parent: e.info.ID, Name: req.Name, Mode: mode})
		return
	}
	c, err := s.spawn(r.Context(), e, req)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.describe(c))
}

// collect waits for a child started with a script (at most ?timeout=), closes it and hands
// its workspace back: the child's report. Collecting again gives the same report.
func (s *Server) collect(w http.ResponseWriter, r *http.Request) {
	e := s.entry(w, r)
	if e == nil {
		return
	}
	if e.s == nil {
		writeErr(w, &stateError{ID: e.info.ID})
		return
	}
	var timeout time.Duration
	if t := r.URL.Query().Get("timeout"); t != "" {
		d, err := config.ParseDuration(t)
		if err != nil {
			writeErr(w, &badRequest{msg: "timeout: " + err.Error()})
			return
		}
		timeout = max(d, 0)
	}
	rep, err := e.s.Collect(r.Context(), r.PathValue("child"), timeout)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, 200, rep)
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request) {
	e := s.entry(w, r)
	if e == nil {
		return
	}
	if e.s == nil {
		writeErr(w, &orchestrator.GoneError{ID: r.PathValue("question")})
		return
	}
	var req api.AnswerRequest
	if err := readJSON(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	if req.Client == "" {
		req.Client = "api"
	}
	if err := e.s.Answer(r.PathValue("question"), orchestrator.Answer{Approve: req.Approve, ForSession: req.ForSession, Client: req.Client}); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) jobs(w http.ResponseWriter, r *http.Request) {
	if e := s.entry(w, r); e != nil {
		jobs := s.describe(e).Jobs
		if jobs == nil {
			jobs = []api.Job{}
		}
		writeJSON(w, 200, jobs)
	}
}

// jobOf finds a request's job: a live one of the session, or the record of one that ended
// before this daemon took the session up (past).
func (s *Server) jobOf(w http.ResponseWriter, r *http.Request) (e *entry, j *orchestrator.Job, past *api.Job) {
	e = s.entry(w, r)
	if e == nil {
		return nil, nil, nil
	}
	id := r.PathValue("job")
	e.mu.Lock()
	rec, ok := e.past[id]
	e.mu.Unlock()
	if ok {
		return e, nil, &rec
	}
	if e.s == nil {
		writeErr(w, &stateError{ID: e.info.ID})
		return nil, nil, nil
	}
	j, err := e.s.Job(id)
	if err != nil {
		writeErr(w, err)
		return nil, nil, nil
	}
	return e, j, nil
}

func (e *entry) describeJob(j *orchestrator.Job) api.Job {
	e.mu.Lock()
	defer e.mu.Unlock()
	return describeJob(j, e.artifacts)
}

func (s *Server) job(w http.ResponseWriter, r *http.Request) {
	switch e, j, past := s.jobOf(w, r); {
	case past != nil:
		writeJSON(w, 200, past)
	case j != nil:
		writeJSON(w, 200, e.describeJob(j))
	}
}

// waitJob waits for a job's end, at most ?timeout= (a duration; default: until it ends or
// the client goes): the job as it is then.
func (s *Server) waitJob(w http.ResponseWriter, r *http.Request) {
	e, j, past := s.jobOf(w, r)
	if past != nil {
		writeJSON(w, 200, past)
		return
	}
	if j == nil {
		return
	}
	ctx := r.Context()
	if t := r.URL.Query().Get("timeout"); t != "" {
		d, err := config.ParseDuration(t)
		if err != nil {
			writeErr(w, &badRequest{msg: "timeout: " + err.Error()})
			return
		}
		if d >= 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d)
			defer cancel()
		}
	}
	select {
	case <-j.Done():
	case <-ctx.Done():
		if r.Context().Err() != nil {
			return
		}
	}
	writeJSON(w, 200, e.describeJob(j))
}

// killJob kills a live job; an ended one is left as it ended.
func (s *Server) killJob(w http.ResponseWriter, r *http.Request) {
	switch e, j, past := s.jobOf(w, r); {
	case past != nil:
		writeJSON(w, 200, past)
	case j != nil:
		j.Kill()
		writeJSON(w, 200, e.describeJob(j))
	}
}

// events streams a session's events as server-sent events. ?client= interactive (default)
// or gateway attaches the stream to the session as its client; watch only watches.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	e := s.entry(w, r)
	if e == nil {
		return
	}
	kind := r.URL.Query().Get("client")
	switch kind {
	case "":
		kind = api.StreamInteractive
	case api.StreamInteractive, api.StreamGateway, api.StreamWatch:
	default:
		writeErr(w, &badRequest{msg: fmt.Sprintf("client %q: interactive, gateway or watch", kind)})
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		writeErr(w, errors.New("streaming unsupported"))
		return
	}
	sub := e.hub.subscribe(kind)
	defer e.hub.unsubscribe(sub)
	if kind != api.StreamWatch && e.s != nil {
		defer e.s.Attach(sub)()
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(200)
	fmt.Fprint(w, ": paddock event stream\n\n")
	fl.Flush()
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	for {
		evs, cut := sub.take()
		for _, ev := range evs {
			b, _ := json.Marshal(ev)
			fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ev.Seq, ev.Kind, b)
		}
		if len(evs) > 0 {
			fl.Flush()
		}
		if cut {
			return
		}
		select {
		case <-sub.wake:
		case <-ping.C:
			fmt.Fprint(w, ": ping\n\n")
			fl.Flush()
		case <-r.Context().Done():
			return
		}
	}
}

func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	s.metrics.write(w)
}

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(OpenAPI)
}
