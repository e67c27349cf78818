package flowdef_test

import (
	"context"
	"fmt"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowdef"
)

type Greeting struct {
	Name string `json:"name"`
}

// Every problem is reported at once, each at its file:line:column.
func ExampleLoad_errors() {
	cat := flowdef.NewCatalog()
	_ = flowdef.AddStep(cat, flow.Step[Greeting, string]{
		Name: "greet",
		Run:  func(_ context.Context, g Greeting) (string, error) { return "hello " + g.Name, nil },
	})
	_, err := flowdef.Load("hello.yaml", []byte(`
name: hello
version: 1
inputs:
  who: {type: int}
steps:
  - id: greet
    uses: greet
    with: {name: input.who, mood: '"happy"'}
  - id: again
    uses: greet
    needs: [greet, later]
`), cat)
	fmt.Println(err)
	// Output:
	// hello.yaml:9:18: step greet: with.name: type mismatch: int where string is expected
	// hello.yaml:9:35: step greet: with.mood: the Go type Greeting (the input of step greet) has no field named "mood" in JSON (it has name)
	// hello.yaml:12:20: step again needs unknown step "later"
}

// A definition's DAG in Mermaid, for a README or a wiki.
func ExampleGraph() {
	d, err := flowdef.Parse("etl.yaml", []byte(`
name: etl
version: 2
steps:
  - {id: extract, uses: extract}
  - {id: clean, uses: clean, needs: extract, forEach: steps.extract.output}
  - {id: count, uses: count, needs: extract}
  - {id: load, uses: load, needs: [clean, count]}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	g, _ := flowdef.Graph(d, flowdef.FormatMermaid, nil)
	fmt.Print(g)
	// Output:
	// flowchart LR
	//   extract["extract<br/>extract"]
	//   clean["clean<br/>clean ×each"]
	//   count["count<br/>count"]
	//   load["load<br/>load"]
	//   extract --> clean
	//   extract --> count
	//   clean --> load
	//   count --> load
}
