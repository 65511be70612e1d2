package workspace

import (
	"encoding/json"
	"reflect"
	"testing"
	"testing/quick"
)

// The API's forms of a hand-back's and a clone's reports are the reports: the same JSON,
// byte for byte, for any report.
func TestAPIFormsMatch(t *testing.T) {
	t.Parallel()
	same := func(a, b any) bool {
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if string(ja) != string(jb) {
			t.Errorf("the report's JSON\n%s\nits API form's\n%s", ja, jb)
			return false
		}
		return true
	}
	prop := func(r *Report, c *CloneReport) bool {
		return same(r, r.API()) && same(c, c.API()) && reflect.DeepEqual(CloneReportOf(c.API()), c)
	}
	if err := quick.Check(prop, &quick.Config{MaxCount: 300}); err != nil {
		t.Error(err)
	}
	same(&Report{}, (&Report{}).API()) // no paths: null lists, as before
}
