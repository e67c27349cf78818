package steps

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// HTTP describes a step that sends its input as JSON to a URL and decodes
// the JSON response as its output. Every request carries an Idempotency-Key
// header (flow.IdempotencyKey) that stays the same across the step's
// attempts, so a service that deduplicates on it applies the call once even
// when the step runs again after a crash.
//
// Network errors, 5xx and 429 responses are retried per Retry; any other
// non-2xx response fails the step at once (flow.Permanent).
type HTTP[In, Out any] struct {
	// Name is the step name, persisted.
	Name string
	// URL receives the request.
	URL string
	// Method defaults to POST.
	Method string
	// Header is added to every request.
	Header http.Header
	// UndoURL, when set, makes the step compensable: the compensation POSTs
	// {"input": …, "output": …} to it, with its own idempotency key.
	UndoURL string
	// Client defaults to http.DefaultClient.
	Client *http.Client
	// Retry and Timeout are the step's; see flow.Step.
	Retry   *flow.RetryPolicy
	Timeout time.Duration
}

// Step returns the flow step.
func (h HTTP[In, Out]) Step() flow.Step[In, Out] {
	s := flow.Step[In, Out]{
		Name:    h.Name,
		Retry:   h.Retry,
		Timeout: h.Timeout,
		Run: func(ctx context.Context, in In) (Out, error) {
			var out Out
			method := h.Method
			if method == "" {
				method = http.MethodPost
			}
			body, err := h.call(ctx, method, h.URL, in)
			if err != nil {
				return out, err
			}
			if err := json.Unmarshal(body, &out); err != nil {
				return out, flow.Permanent(fmt.Errorf("%s %s: decode response into %T: %w", method, h.URL, out, err))
			}
			return out, nil
		},
	}
	if h.UndoURL != "" {
		s.Compensate = func(ctx context.Context, in In, out Out) error {
			_, err := h.call(ctx, http.MethodPost, h.UndoURL, struct {
				Input  In  `json:"input"`
				Output Out `json:"output"`
			}{in, out})
			return err
		}
	}
	return s
}

// call sends v as JSON and returns the body of a 2xx response.
func (h HTTP[In, Out]) call(ctx context.Context, method, url string, v any) ([]byte, error) {
	payload, err := json.Marshal(v)
	if err != nil {
		return nil, flow.Permanent(fmt.Errorf("%s %s: encode request: %w", method, url, err))
	}
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(payload))
	if err != nil {
		return nil, flow.Permanent(fmt.Errorf("%s %s: %w", method, url, err))
	}
	for k, vs := range h.Header {
		req.Header[k] = append([]string(nil), vs...)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", flow.IdempotencyKey(ctx))
	client := h.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: read response: %w", method, url, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		err := fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, bytes.TrimSpace(body))
		if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
			return nil, err
		}
		return nil, flow.Permanent(err)
	}
	return body, nil
}
