package defgen

import "testing"

func TestVarName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"ExtractInput": "extractInput", "URLInput": "urlInput", "ABInput": "abInput", "XOutput": "xOutput", "ID": "id",
	} {
		if got := varName(in); got != want {
			t.Errorf("varName(%q) = %q, want %q", in, got, want)
		}
	}
}
