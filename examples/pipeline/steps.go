package main

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"sync"

	"github.com/flowlite/flowlite/flow"
)

// The step types, named as flowdefgen expects: for `uses: extract`,
// ExtractInput and ExtractOutput.

type ExtractInput struct {
	Dataset   string `json:"dataset"`
	BatchSize int    `json:"batchSize"`
}

type ExtractOutput struct {
	Batches [][]string `json:"batches"`
}

type TransformInput struct {
	Batch []string `json:"batch"`
	Index int      `json:"index"`
}

type TransformOutput struct {
	Rows     int    `json:"rows"`
	Checksum uint32 `json:"checksum"`
}

type LoadInput struct {
	Dataset   string   `json:"dataset"`
	Rows      int      `json:"rows"`
	Checksums []uint32 `json:"checksums"`
}

type LoadOutput struct {
	Table string `json:"table"`
	Rows  int    `json:"rows"`
}

type PublishInput struct {
	Table string `json:"table"`
}

type PublishOutput struct {
	URL string `json:"url"`
}

// warehouse is the pretend outside world the steps talk to: datasets to
// read, tables loaded, tables published. Every method is idempotent, as a
// step's effects must be.
type warehouse struct {
	mu        sync.Mutex
	datasets  map[string][]string
	tables    map[string]int // loaded table → rows
	published map[string]bool
	refuse    map[string]bool // tables the publisher refuses
}

func newWarehouse() *warehouse {
	w := &warehouse{datasets: map[string][]string{}, tables: map[string]int{}, published: map[string]bool{}, refuse: map[string]bool{}}
	for _, name := range []string{"clicks", "orders", "refunds"} {
		for i := range 7 {
			w.datasets[name] = append(w.datasets[name], fmt.Sprintf("%s-%d", name, i))
		}
	}
	w.refuse["refunds_v1"] = true
	return w
}

// steps implements PipelineSteps (generated) over a warehouse.
type steps struct{ w *warehouse }

func (s steps) Extract(ctx context.Context, in ExtractInput) (ExtractOutput, error) {
	s.w.mu.Lock()
	rows, ok := s.w.datasets[in.Dataset]
	s.w.mu.Unlock()
	if !ok {
		return ExtractOutput{}, flow.Permanent(fmt.Errorf("no dataset %q", in.Dataset))
	}
	size := max(in.BatchSize, 1)
	var out ExtractOutput
	for len(rows) > 0 {
		n := min(size, len(rows))
		out.Batches = append(out.Batches, rows[:n])
		rows = rows[n:]
	}
	return out, nil
}

func (s steps) Transform(ctx context.Context, in TransformInput) (TransformOutput, error) {
	return TransformOutput{Rows: len(in.Batch), Checksum: crc32.ChecksumIEEE([]byte(strings.Join(in.Batch, ",")))}, nil
}

func (s steps) Load(ctx context.Context, in LoadInput) (LoadOutput, error) {
	table := in.Dataset + "_v1"
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	s.w.tables[table] = in.Rows
	return LoadOutput{Table: table, Rows: in.Rows}, nil
}

// CompensateLoad drops the table Load created: flowdefgen's Step value
// picks it up as the load step's compensation.
func (s steps) CompensateLoad(ctx context.Context, in LoadInput, out LoadOutput) error {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	delete(s.w.tables, out.Table)
	return nil
}

func (s steps) Publish(ctx context.Context, in PublishInput) (PublishOutput, error) {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	if s.w.refuse[in.Table] {
		return PublishOutput{}, flow.Permanent(errors.New("publisher refused " + in.Table))
	}
	s.w.published[in.Table] = true
	return PublishOutput{URL: "https://data.example/" + in.Table}, nil
}

func (w *warehouse) snapshot() (tables map[string]int, published []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	tables = map[string]int{}
	for k, v := range w.tables {
		tables[k] = v
	}
	for k := range w.published {
		published = append(published, k)
	}
	return tables, published
}
