package flowdef_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowdef"
)

// The steps of the test catalog: a small data pipeline and an order saga.

type ExtractIn struct {
	Source string `json:"source"`
	Size   int    `json:"size"`
}

type ExtractOut struct {
	Batches [][]int `json:"batches"`
	Count   int     `json:"count"`
}

type TransformIn struct {
	Batch  []int `json:"batch"`
	Factor int   `json:"factor"`
}

type TransformOut struct {
	Sum int `json:"sum"`
}

type LoadIn struct {
	Sums  []int  `json:"sums"`
	Table string `json:"table"`
}

type LoadOut struct {
	Loaded int    `json:"loaded"`
	ID     string `json:"id"`
}

type PublishIn struct {
	ID string `json:"id"`
}

type PublishOut struct {
	URL string `json:"url"`
}

// recorder notes what ran, in order, for assertions.
type recorder struct {
	mu   sync.Mutex
	ran  []string
	comp []string

	active, maxActive int
}

func (r *recorder) note(list *[]string, s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*list = append(*list, s)
}

func (r *recorder) ranSteps() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ran)
}

func (r *recorder) compensated() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.comp)
}

func testCatalog(t testing.TB, rec *recorder) *flowdef.Catalog {
	t.Helper()
	cat := flowdef.NewCatalog()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(flowdef.AddStep(cat, flow.Step[ExtractIn, ExtractOut]{
		Name: "extract",
		Run: func(ctx context.Context, in ExtractIn) (ExtractOut, error) {
			rec.note(&rec.ran, "extract")
			var out ExtractOut
			for i := 0; i < in.Size; i++ {
				if i%2 == 0 {
					out.Batches = append(out.Batches, nil)
				}
				out.Batches[len(out.Batches)-1] = append(out.Batches[len(out.Batches)-1], i+1)
				out.Count++
			}
			return out, nil
		},
	}))
	must(flowdef.AddStep(cat, flow.Step[TransformIn, TransformOut]{
		Name: "transform",
		Run: func(ctx context.Context, in TransformIn) (TransformOut, error) {
			rec.note(&rec.ran, fmt.Sprint("transform", in.Batch))
			s := 0
			for _, v := range in.Batch {
				s += v * max(in.Factor, 1)
			}
			return TransformOut{Sum: s}, nil
		},
		Compensate: func(ctx context.Context, in TransformIn, out TransformOut) error {
			rec.note(&rec.comp, fmt.Sprint("transform", in.Batch))
			return nil
		},
	}))
	must(flowdef.AddStep(cat, flow.Step[LoadIn, LoadOut]{
		Name: "load",
		Run: func(ctx context.Context, in LoadIn) (LoadOut, error) {
			rec.note(&rec.ran, "load")
			n := 0
			for _, s := range in.Sums {
				n += s
			}
			return LoadOut{Loaded: n, ID: in.Table + "-1"}, nil
		},
		Compensate: func(ctx context.Context, in LoadIn, out LoadOut) error {
			rec.note(&rec.comp, "load")
			return nil
		},
	}))
	must(flowdef.AddCompensation(cat, "truncate", func(ctx context.Context, in LoadIn, out LoadOut) error {
		rec.note(&rec.comp, "truncate "+out.ID)
		return nil
	}))
	must(flowdef.AddStep(cat, flow.Step[PublishIn, PublishOut]{
		Name: "publish",
		Run: func(ctx context.Context, in PublishIn) (PublishOut, error) {
			rec.note(&rec.ran, "publish")
			if in.ID == "fail" {
				return PublishOut{}, flow.Permanent(errors.New("publisher refused"))
			}
			return PublishOut{URL: "https://example.test/" + in.ID}, nil
		},
	}))
	must(flowdef.AddStep(cat, flow.Step[string, string]{
		Name: "echo",
		Run: func(ctx context.Context, in string) (string, error) {
			rec.note(&rec.ran, "echo "+in)
			return in, nil
		},
	}))
	must(flowdef.AddStep(cat, flow.Step[int, int]{
		Name: "track",
		Run: func(ctx context.Context, in int) (int, error) {
			rec.mu.Lock()
			rec.active++
			rec.maxActive = max(rec.maxActive, rec.active)
			rec.mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			rec.mu.Lock()
			rec.active--
			rec.mu.Unlock()
			rec.note(&rec.ran, fmt.Sprint("track ", in))
			return in * in, nil
		},
	}))
	must(flowdef.AddWorkflow(cat, goChild))
	return cat
}

// goChild is a Go workflow that definitions call as a child.
var goChild = flow.Workflow[PublishIn, PublishOut]{
	Name: "go_child",
	Run: func(wc flow.Context, in PublishIn) (PublishOut, error) {
		return PublishOut{URL: "go://" + in.ID}, nil
	},
}
