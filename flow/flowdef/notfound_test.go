package flowdef_test

import (
	"errors"
	"testing"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowdef"
	"github.com/flowlite/flowlite/flow/flowtest"
)

// A missing definition and a missing run are told apart: starting a
// definition the library does not hold, or reading one the database does
// not hold, is ErrDefinitionNotFound and never ErrRunNotFound; inspecting
// an unknown run is ErrRunNotFound and never ErrDefinitionNotFound.
func TestDefinitionNotFoundIsNotRunNotFound(t *testing.T) {
	t.Parallel()
	if errors.Is(flow.ErrDefinitionNotFound, flow.ErrRunNotFound) || errors.Is(flow.ErrRunNotFound, flow.ErrDefinitionNotFound) {
		t.Fatal("ErrDefinitionNotFound and ErrRunNotFound match each other")
	}
	ctx := t.Context()
	env := flowtest.New(t, nil)
	lib, err := flowdef.LoadLibrary(ctx, env.Engine, flowdef.NewCatalog())
	if err != nil {
		t.Fatal(err)
	}
	_, startErr := lib.Start(ctx, env.Engine, "unregistered", nil, nil)
	_, latestErr := env.Engine.GetDefinition(ctx, "unregistered", 0)
	_, versionErr := env.Engine.GetDefinition(ctx, "unregistered", 3)
	for what, err := range map[string]error{
		"start of an unregistered definition":     startErr,
		"latest version of an unknown definition": latestErr,
		"version 3 of an unknown definition":      versionErr,
	} {
		if !errors.Is(err, flow.ErrDefinitionNotFound) || errors.Is(err, flow.ErrRunNotFound) {
			t.Errorf("%s: %v, want ErrDefinitionNotFound and not ErrRunNotFound", what, err)
		}
	}
	if _, err := env.Engine.Inspect(ctx, "no-such-run"); !errors.Is(err, flow.ErrRunNotFound) || errors.Is(err, flow.ErrDefinitionNotFound) {
		t.Errorf("inspect of an unknown run: %v, want ErrRunNotFound and not ErrDefinitionNotFound", err)
	}
}
