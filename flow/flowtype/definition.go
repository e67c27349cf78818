package flowtype

// PutResult says what storing a workflow definition did (flow's
// Engine.PutDefinition, flowdef.Apply).
type PutResult string

// Outcomes of storing a definition.
const (
	// PutCreated: the (name, version) was new.
	PutCreated PutResult = "created"
	// PutUnchanged: the same document (same hash) was stored already.
	PutUnchanged PutResult = "unchanged"
	// PutReplaced: the version held another document, which nothing used
	// yet, and now holds this one.
	PutReplaced PutResult = "replaced"
)
