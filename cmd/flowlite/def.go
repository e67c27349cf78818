package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowdef"
)

// defJSON is a stored definition in --json output.
type defJSON struct {
	Name      string `json:"name"`
	Version   int    `json:"version"`
	Hash      string `json:"hash"`
	File      string `json:"file,omitempty"`
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
	InUse     bool   `json:"in_use"`
	Body      string `json:"body,omitempty"`
	Result    string `json:"result,omitempty"` // apply
}

func (a *app) defCommand() *cobra.Command {
	var catalogFile string
	cmd := &cobra.Command{
		Use:   "def",
		Short: "Validate, store and show workflow definitions (flow/flowdef)",
		Long: `Workflow definitions are JSON or YAML documents (see flow/flowdef and its
schema.json) stored in the database, unique by name and version.

The CLI does not have the program's steps. With --catalog FILE, a manifest
the program wrote (flowdef's Catalog.Manifest: each step's name and the JSON
Schemas of its input and output), validate, apply and graph check everything
the program would: unknown steps and fields, and types. apply requires it,
so that no unchecked definition is stored. Without it validate and graph
check what needs no steps: the document's shape, the DAG (cycles, unknown
needs, duplicate ids), expressions' syntax and names of inputs, variables and
steps.

A stored version that a run or an engine uses cannot change: apply a new
version instead; runs keep the version they started with.`,
	}
	cmd.PersistentFlags().StringVar(&catalogFile, "catalog", "", "check definitions against this catalog manifest (JSON, from flowdef's Catalog.Manifest)")
	cmd.PersistentPreRunE = func(*cobra.Command, []string) error {
		if catalogFile == "" {
			return nil
		}
		b, err := os.ReadFile(catalogFile)
		if err != nil {
			return usageErrorf("read --catalog: %v", err)
		}
		cat, err := flowdef.CatalogFromManifest(b)
		if err != nil {
			return usageErrorf("--catalog %s: %v", catalogFile, err)
		}
		a.catalog = cat
		return nil
	}
	cmd.AddCommand(a.defValidateCommand(), a.defApplyCommand(), a.defListCommand(), a.defShowCommand(), a.defGraphCommand())
	return cmd
}

func filesArgs(_ *cobra.Command, args []string) error {
	if len(args) == 0 {
		return usageErrorf("expected one or more definition files")
	}
	return nil
}

// readDefinitions reads and validates files; it returns the documents only
// when all are valid, else an error listing every problem of every file.
func (a *app) readDefinitions(files []string) (map[string][]byte, error) {
	srcs := map[string][]byte{}
	var bad []string
	var problems []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read definition: %w", err)
		}
		if _, err := flowdef.Validate(f, src, a.catalog); err != nil {
			problems = append(problems, err.Error())
			bad = append(bad, f)
			continue
		}
		srcs[f] = src
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("%d of %d definition(s) invalid (%s):\n%s", len(bad), len(files), strings.Join(bad, ", "), strings.Join(problems, "\n"))
	}
	return srcs, nil
}

func (a *app) defValidateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check definition files (no database needed)",
		Args:  filesArgs,
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			if _, err := a.readDefinitions(args); err != nil {
				return err
			}
			if a.json {
				return writeJSON(a.stdout, map[string]any{"valid": args})
			}
			for _, f := range args {
				fmt.Fprintf(a.stdout, "%s: valid\n", f)
			}
			return nil
		}),
	}
}

func (a *app) defApplyCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "apply FILE...",
		Short: "Validate definition files and store them",
		Long: `Validate every file against the program's catalog (--catalog, required),
then store each under its name and version. Nothing is stored unless every
file is valid. Storing a document again changes nothing; a different
document for a version in use is refused (exit code 1).`,
		Args: filesArgs,
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			// Without the program's steps only the document's shape could be
			// checked, and a definition whose types do not match its steps
			// would be stored, to fail when the program loads it.
			if a.catalog == nil {
				return usageErrorf("def apply needs --catalog FILE (the program's Catalog.Manifest): a definition is stored only once its steps and types are checked")
			}
			srcs, err := a.readDefinitions(args)
			if err != nil {
				return err
			}
			return a.withEngine(cmd.Context(), func(e *flow.Engine) error {
				var out []defJSON
				for _, f := range args {
					d, res, err := flowdef.Apply(cmd.Context(), e, f, srcs[f], a.catalog)
					if err != nil {
						return err
					}
					out = append(out, defJSON{Name: d.Name, Version: d.Version, Hash: flowdef.Hash(srcs[f]), File: f, Result: string(res)})
				}
				if a.json {
					return writeJSON(a.stdout, out)
				}
				for _, d := range out {
					fmt.Fprintf(a.stdout, "%s version %d: %s (%s)\n", d.Name, d.Version, d.Result, d.File)
				}
				return nil
			})
		}),
	}
}

func (a *app) defListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List stored definitions",
		Args:  cobra.NoArgs,
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return a.withReader(cmd.Context(), func(e *flow.Engine) error {
				list, err := e.ListDefinitions(cmd.Context())
				if err != nil {
					return err
				}
				if a.json {
					out := make([]defJSON, len(list))
					for i, d := range list {
						out[i] = toDefJSON(d)
					}
					return writeJSON(a.stdout, out)
				}
				t := newTable(a.stdout, "NAME", "VERSION", "HASH", "IN USE", "UPDATED", "FILE")
				for _, d := range list {
					t.row(cell(d.Name, 40), strconv.Itoa(d.Version), d.Hash[:min(12, len(d.Hash))], strconv.FormatBool(d.InUse),
						d.UpdatedAt.Format("2006-01-02 15:04:05"), cell(d.File, 40))
				}
				return t.flush()
			})
		}),
	}
}

func toDefJSON(d flow.StoredDefinition) defJSON {
	return defJSON{
		Name: d.Name, Version: d.Version, Hash: d.Hash, File: d.File, InUse: d.InUse, Body: string(d.Body),
		CreatedAt: d.CreatedAt.Format("2006-01-02T15:04:05.000Z07:00"), UpdatedAt: d.UpdatedAt.Format("2006-01-02T15:04:05.000Z07:00"),
	}
}

// nameVersionArgs accepts NAME [VERSION].
func nameVersionArgs(_ *cobra.Command, args []string) error {
	switch {
	case len(args) == 0 || len(args) > 2:
		return usageErrorf("expected a definition name and optionally a version")
	case args[0] == "":
		return usageErrorf("empty definition name")
	}
	if len(args) == 2 {
		if v, err := strconv.Atoi(args[1]); err != nil || v < 1 {
			return usageErrorf("invalid version %q: want a positive integer", args[1])
		}
	}
	return nil
}

// stored reads NAME [VERSION] (default: the newest) from the database.
func stored(ctx context.Context, e *flow.Engine, args []string) (flow.StoredDefinition, error) {
	version := 0
	if len(args) == 2 {
		version, _ = strconv.Atoi(args[1])
	}
	d, err := e.GetDefinition(ctx, args[0], version)
	if errors.Is(err, flow.ErrDefinitionNotFound) {
		if version == 0 {
			return d, fmt.Errorf("no definition named %q", args[0])
		}
		return d, fmt.Errorf("no definition %q version %d", args[0], version)
	}
	return d, err
}

func (a *app) defShowCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "show NAME [VERSION]",
		Short: "Print a stored definition (default: its newest version)",
		Args:  nameVersionArgs,
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return a.withReader(cmd.Context(), func(e *flow.Engine) error {
				d, err := stored(cmd.Context(), e, args)
				if err != nil {
					return err
				}
				if a.json {
					return writeJSON(a.stdout, toDefJSON(d))
				}
				_, err = a.stdout.Write(d.Body)
				return err
			})
		}),
	}
}

func (a *app) defGraphCommand() *cobra.Command {
	var format, file string
	cmd := &cobra.Command{
		Use:   "graph (NAME [VERSION] | --file FILE)",
		Short: "Draw a definition's DAG as DOT, Mermaid or SVG",
		Long: `Write the DAG of a stored definition (default: its newest version), or of a
file with --file (no database needed), to stdout: --format dot (Graphviz),
mermaid or svg (a standalone picture).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if file != "" {
				if len(args) > 0 {
					return usageErrorf("--file takes no name")
				}
				return nil
			}
			return nameVersionArgs(cmd, args)
		},
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			switch format {
			case flowdef.FormatDOT, flowdef.FormatMermaid, flowdef.FormatSVG:
			default:
				return usageErrorf("invalid --format %q: want dot, mermaid or svg", format)
			}
			draw := func(name string, src []byte) error {
				d, err := flowdef.Validate(name, src, a.catalog)
				if err != nil {
					return err
				}
				g, err := flowdef.Graph(d, format, nil)
				if err != nil {
					return err
				}
				_, err = fmt.Fprint(a.stdout, g)
				return err
			}
			if file != "" {
				src, err := os.ReadFile(file)
				if err != nil {
					return fmt.Errorf("read definition: %w", err)
				}
				return draw(file, src)
			}
			return a.withReader(cmd.Context(), func(e *flow.Engine) error {
				d, err := stored(cmd.Context(), e, args)
				if err != nil {
					return err
				}
				return draw(cmp.Or(d.File, d.Name), d.Body)
			})
		}),
	}
	cmd.Flags().StringVar(&format, "format", flowdef.FormatDOT, "dot, mermaid or svg")
	cmd.Flags().StringVar(&file, "file", "", "draw this definition file instead of a stored one")
	return cmd
}
