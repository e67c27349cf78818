package flowdef

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/flowlite/flowlite/flow"
)

// Hash returns the content hash stored with a definition: the SHA-256 of
// its document, in hex.
func Hash(src []byte) string {
	sum := sha256.Sum256(src)
	return hex.EncodeToString(sum[:])
}

// Apply validates src against cat (nil: the structural check of Validate)
// and stores it in e's database under its (name, version). A definition
// that does not validate is not stored. Storing the same document again
// changes nothing; a different document for a version in use is refused
// with flow.ErrDefinitionFrozen.
func Apply(ctx context.Context, e *flow.Engine, file string, src []byte, cat *Catalog) (*Definition, flow.PutResult, error) {
	d, err := Validate(file, src, cat)
	if err != nil {
		return nil, "", err
	}
	res, err := e.PutDefinition(ctx, flow.StoredDefinition{Name: d.Name, Version: d.Version, Hash: Hash(src), Body: src, File: file})
	if err != nil {
		return nil, "", fmt.Errorf("apply %s: %w", file, err)
	}
	return d, res, nil
}

// Install stores w's document in e's database, as Apply does, then
// registers w on e (see Register): one call that makes a definition the
// program compiled (from a file, or embedded by flowdefgen's generated
// code) both runnable and visible to `flowlite def list` and `def show`
// and to the dashboard, which draws a run's DAG from the stored document.
// Installing the same document again changes nothing; a different
// document under a (name, version) that runs or engines use is refused
// with flow.ErrDefinitionFrozen, before anything is registered: publish a
// change as a new version.
func Install(ctx context.Context, e *flow.Engine, w *Workflow) error {
	d := w.def
	file := d.Pos.File
	if _, err := e.PutDefinition(ctx, flow.StoredDefinition{Name: d.Name, Version: d.Version, Hash: w.hash, Body: d.Source, File: file}); err != nil {
		return fmt.Errorf("install definition %s version %d: %w", d.Name, d.Version, err)
	}
	if err := Register(e, w); err != nil {
		return fmt.Errorf("install definition %s version %d: %w", d.Name, d.Version, err)
	}
	return nil
}

// Library holds the compiled versions of stored definitions, each
// registered on an engine: runs in flight find the version they started
// on, and Start gives new runs the newest.
type Library struct {
	versions map[string][]*Workflow // ascending versions
}

// LoadLibrary compiles every definition stored in e's database against cat
// and registers each version on e (call it before e.Start). A definition
// may call another as a child: each compiled one is added to cat, and
// those that need one not compiled yet are tried again. Versions that do
// not compile are reported together (the others are loaded and
// registered), so a process can start with what it can run and say what
// it cannot.
func LoadLibrary(ctx context.Context, e *flow.Engine, cat *Catalog) (*Library, error) {
	list, err := e.ListDefinitions(ctx)
	if err != nil {
		return nil, fmt.Errorf("load definitions: %w", err)
	}
	lib := &Library{versions: map[string][]*Workflow{}}
	pending := list
	var failures map[string]error
	for len(pending) > 0 {
		failures = map[string]error{}
		var next []flow.StoredDefinition
		for _, sd := range pending {
			full, err := e.GetDefinition(ctx, sd.Name, sd.Version)
			if err != nil {
				return nil, fmt.Errorf("load definition %s version %d: %w", sd.Name, sd.Version, err)
			}
			file := full.File
			if file == "" {
				file = fmt.Sprintf("%s@%d", sd.Name, sd.Version)
			}
			w, err := Load(file, full.Body, cat)
			if err != nil {
				failures[fmt.Sprintf("%s version %d", sd.Name, sd.Version)] = err
				next = append(next, sd)
				continue
			}
			if err := cat.AddDefinition(w); err != nil {
				return nil, err
			}
			if err := Register(e, w); err != nil {
				return nil, fmt.Errorf("register definition %s version %d: %w", w.Name(), w.Version(), err)
			}
			lib.versions[w.Name()] = append(lib.versions[w.Name()], w)
		}
		if len(next) == len(pending) {
			break // no progress: what is left does not compile
		}
		pending = next
		if len(next) == 0 {
			failures = nil
		}
	}
	for _, ws := range lib.versions {
		slices.SortFunc(ws, func(a, b *Workflow) int { return a.Version() - b.Version() })
	}
	if len(failures) > 0 {
		keys := make([]string, 0, len(failures))
		for k := range failures {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		errs := make([]error, len(keys))
		for i, k := range keys {
			errs[i] = fmt.Errorf("definition %s:\n%w", k, failures[k])
		}
		return lib, errors.Join(errs...)
	}
	return lib, nil
}

// Latest returns the newest version of the definition name, or nil.
func (l *Library) Latest(name string) *Workflow {
	ws := l.versions[name]
	if len(ws) == 0 {
		return nil
	}
	return ws[len(ws)-1]
}

// Version returns one version of the definition name, or nil.
func (l *Library) Version(name string, version int) *Workflow {
	for _, w := range l.versions[name] {
		if w.Version() == version {
			return w
		}
	}
	return nil
}

// Start starts a run of the newest version of name; runs started before
// keep the version they started with.
func (l *Library) Start(ctx context.Context, e *flow.Engine, name string, in Values, opts *flow.StartOptions) (*Run, error) {
	w := l.Latest(name)
	if w == nil {
		return nil, fmt.Errorf("start %s: no such definition in the library: %w", name, flow.ErrDefinitionNotFound)
	}
	return Start(ctx, e, w, in, opts)
}
