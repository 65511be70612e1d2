// Package lifecycle is the one transition function of what lives and ends in Paddock:
// sessions, the daemon's entries and jobs. Each of them declares its states and its moves as
// a table (a Machine); its owner keeps the state under its own lock and changes it only
// through Next. A move the table does not hold is refused, so no path of the code ends a thing
// twice, or brings an ended thing back.
package lifecycle

import "fmt"

// Machine is a table of moves: from a state, on an event, to a state.
type Machine[S, E comparable] struct {
	Name  string
	Start S
	Moves map[S]map[E]S
}

// Next is the state a move on ev leads to from from; ok is false when the table holds no such
// move (the owner then leaves its state as it is).
func (m *Machine[S, E]) Next(from S, ev E) (to S, ok bool) {
	to, ok = m.Moves[from][ev]
	return to, ok
}

// Final reports whether s is a state no move leaves.
func (m *Machine[S, E]) Final(s S) bool { return len(m.Moves[s]) == 0 }

// States lists every state the table names, the start first.
func (m *Machine[S, E]) States() []S {
	seen := map[S]bool{m.Start: true}
	out := []S{m.Start}
	add := func(s S) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for from, moves := range m.Moves {
		add(from)
		for _, to := range moves {
			add(to)
		}
	}
	return out
}

// Check says what is wrong with a table: a state the start cannot reach, a state from which
// no final state can be reached (a thing that could never end), or no final state at all.
func (m *Machine[S, E]) Check() error {
	reach := map[S]bool{m.Start: true}
	for todo := []S{m.Start}; len(todo) > 0; {
		s := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		for _, to := range m.Moves[s] {
			if !reach[to] {
				reach[to] = true
				todo = append(todo, to)
			}
		}
	}
	for _, s := range m.States() {
		if !reach[s] {
			return fmt.Errorf("%s: state %v cannot be reached from %v", m.Name, s, m.Start)
		}
		if !m.ends(s, map[S]bool{}) {
			return fmt.Errorf("%s: from state %v no final state can be reached", m.Name, s)
		}
	}
	return nil
}

// ends reports whether a final state can be reached from s.
func (m *Machine[S, E]) ends(s S, seen map[S]bool) bool {
	if m.Final(s) {
		return true
	}
	seen[s] = true
	for _, to := range m.Moves[s] {
		if !seen[to] && m.ends(to, seen) {
			return true
		}
	}
	return false
}
