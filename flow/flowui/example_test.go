package flowui_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/flowlite/flowlite/flow/flowsqlite"
	"github.com/flowlite/flowlite/flow/flowui"
)

// The handler mounted under /ops in an application's mux: pages and API
// answer there, and a POST without the CSRF token, as a bare curl sends
// it, is refused.
func ExampleNew() {
	dir, err := os.MkdirTemp("", "flowui-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	eng, err := flowsqlite.Open(context.Background(), filepath.Join(dir, "app.db"), nil, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()

	ui, err := flowui.New(eng, &flowui.Options{Prefix: "/ops"})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ops/", ui)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/ops/api/runs")
	if err != nil {
		log.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Print(resp.StatusCode, " ", string(body))

	resp, err = http.Post(srv.URL+"/ops/api/runs/order-1/cancel", "", nil)
	if err != nil {
		log.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Print(resp.StatusCode, " ", string(body))
	// Output:
	// 200 {
	//   "runs": [],
	//   "more": false
	// }
	// 403 {
	//   "error": "request refused: no CSRF cookie: load a page of the dashboard (or GET the API's csrf endpoint) first, and send its cookie"
	// }
}
