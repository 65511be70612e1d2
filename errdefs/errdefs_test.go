package errdefs

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// Every class has its own status, and a client reads the class back from the status.
func TestStatusTable(t *testing.T) {
	t.Parallel()
	seen := map[int]Class{}
	for c := Internal; c <= Canceled; c++ {
		st := HTTPStatus(c)
		if prev, ok := seen[st]; ok {
			t.Errorf("%s and %s share status %d", prev, c, st)
		}
		seen[st] = c
		if back := FromHTTPStatus(st); back != c {
			t.Errorf("%s: status %d reads back as %s", c, st, back)
		}
		if c.String() == "" || (c != Internal && c.String() == "internal") {
			t.Errorf("class %d has no name", c)
		}
	}
	if FromHTTPStatus(418) != InvalidArgument || FromHTTPStatus(502) != Internal || HTTPStatus(Class(99)) != 500 {
		t.Error("an unknown status or class")
	}
}

// An error's class and code are its first classed error's, however it is wrapped; a
// context's error is a deadline or a cancellation; anything else is internal.
func TestOf(t *testing.T) {
	t.Parallel()
	nf := New(NotFound, "not_found", "no session x")
	for _, c := range []struct {
		err   error
		class Class
		code  string
	}{
		{nf, NotFound, "not_found"},
		{fmt.Errorf("open: %w", nf), NotFound, "not_found"},
		{errors.Join(errors.New("a"), nf), NotFound, "not_found"},
		{Wrap(Conflict, "session_closed", nf), Conflict, "session_closed"},
		{fmt.Errorf("wait: %w", context.DeadlineExceeded), DeadlineExceeded, "timeout"},
		{context.Canceled, Canceled, "canceled"},
		{errors.New("disk on fire"), Internal, "failed"},
	} {
		if cl, code := Of(c.err); cl != c.class || code != c.code {
			t.Errorf("%v: %s %q, want %s %q", c.err, cl, code, c.class, c.code)
		}
	}
	if w := Wrap(Refused, "x", errors.New("inner")); w.Error() != "inner" || !errors.Is(w, w.Unwrap()) {
		t.Errorf("Wrap: %v", w)
	}
}
