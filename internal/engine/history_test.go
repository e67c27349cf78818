package engine

import "testing"

// A call's branch scope is the whole chain of All and First prefixes its
// name starts with, and only that.
func TestScopeOf(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, scope string }{
		{"charge", ""},
		{"all0.1/charge", "all0.1/"},
		{"first2.0/all0.3/flow.sleep", "first2.0/all0.3/"},
		{"all0.1/notall1.2/x", "all0.1/"}, // a prefix inside a name is not a scope
		{"all/charge", ""},                // a scope has a call and a branch number
		{"allx.1/charge", ""},
	}
	for _, tt := range tests {
		if got := scopeOf(tt.name); got != tt.scope {
			t.Errorf("scopeOf(%q) = %q, want %q", tt.name, got, tt.scope)
		}
	}
}

// describeCall names each kind of recorded call as the non-determinism
// errors print it.
func TestDescribeCall(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, want string }{
		{"charge", `step "charge"`},
		{"flow.receive:approve", `receive of signal "approve"`},
		{"flow.child:invoice", `start of child workflow "invoice"`},
		{"flow.await:r-1", `wait for child run "r-1"`},
		{"flow.signal:done", `send of signal "done"`},
		{"flow.sleep", "sleep"},
		{"flow.first", "race (First)"},
		{"flow.now", "Now"},
		{"flow.sleeper", `step "flow.sleeper"`},
	}
	for _, tt := range tests {
		if got := describeCall(tt.name); got != tt.want {
			t.Errorf("describeCall(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}
