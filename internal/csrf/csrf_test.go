package csrf_test

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/internal/csrf"
)

// protected returns a handler behind a Protector with key that records
// whether the request reached it and why one was denied.
func protected(t *testing.T, key []byte) (h http.Handler, reached *bool, denied *error) {
	t.Helper()
	reached, denied = new(bool), new(error)
	p, err := csrf.New(key, "/ops/", func(w http.ResponseWriter, _ *http.Request, err error) {
		*denied = err
		http.Error(w, err.Error(), http.StatusForbidden)
	})
	if err != nil {
		t.Fatal(err)
	}
	return p.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*reached = true
		_, _ = w.Write([]byte(csrf.Token(r)))
	})), reached, denied
}

// issue GETs a page and returns the cookie and the token it got.
func issue(t *testing.T, h http.Handler) (*http.Cookie, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ops/", nil))
	cookies := rec.Result().Cookies()
	if len(cookies) != 1 || cookies[0].Name != csrf.CookieName {
		t.Fatalf("GET set cookies %v, want %s", cookies, csrf.CookieName)
	}
	c := cookies[0]
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/ops/" {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/ops/", c)
	}
	if rec.Body.Len() == 0 {
		t.Fatal("no token in the request's context")
	}
	return c, rec.Body.String()
}

func TestHandler(t *testing.T) {
	t.Parallel()
	key := bytes.Repeat([]byte("k"), 32)
	h, _, _ := protected(t, key)
	cookie, token := issue(t, h)
	otherCookie, otherToken := issue(t, h)
	otherKey, _, _ := protected(t, bytes.Repeat([]byte("x"), 32))
	_, foreignToken := issue(t, otherKey)
	planted := &http.Cookie{Name: csrf.CookieName, Value: strings.Repeat("A", 43)}

	for _, c := range []struct {
		name   string
		method string
		cookie *http.Cookie
		header string
		form   string
		want   error // nil: reaches the handler
	}{
		{"GET needs nothing", "GET", nil, "", "", nil},
		{"HEAD needs nothing", "HEAD", nil, "", "", nil},
		{"bare POST", "POST", nil, "", "", csrf.ErrNoCookie},
		{"token without cookie", "POST", nil, token, "", csrf.ErrNoCookie},
		{"cookie without token", "POST", cookie, "", "", csrf.ErrNoToken},
		{"header token", "POST", cookie, token, "", nil},
		{"form token", "POST", cookie, "", token, nil},
		{"DELETE with header", "DELETE", cookie, token, "", nil},
		{"PUT without token", "PUT", cookie, "", "", csrf.ErrNoToken},
		{"token of another cookie", "POST", cookie, otherToken, "", csrf.ErrTokenInvalid},
		{"cookie of another token", "POST", otherCookie, token, "", csrf.ErrTokenInvalid},
		{"token of another key", "POST", cookie, foreignToken, "", csrf.ErrTokenInvalid},
		{"planted cookie", "POST", planted, token, "", csrf.ErrTokenInvalid},
		{"malformed cookie", "POST", &http.Cookie{Name: csrf.CookieName, Value: "short"}, token, "", csrf.ErrNoCookie},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h, reached, denied := protected(t, key)
			var body *strings.Reader
			if c.form != "" {
				body = strings.NewReader(url.Values{csrf.FieldName: {c.form}}.Encode())
			} else {
				body = strings.NewReader("")
			}
			req := httptest.NewRequest(c.method, "/ops/runs/x/cancel", body)
			if c.form != "" {
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			if c.cookie != nil {
				req.AddCookie(c.cookie)
			}
			if c.header != "" {
				req.Header.Set(csrf.HeaderName, c.header)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if c.want == nil {
				if !*reached || rec.Code != http.StatusOK {
					t.Errorf("refused (%d, %v), want passed", rec.Code, *denied)
				}
				return
			}
			if *reached || rec.Code != http.StatusForbidden || !errors.Is(*denied, c.want) {
				t.Errorf("reached %v, status %d, denied with %v; want 403 with %v", *reached, rec.Code, *denied, c.want)
			}
		})
	}
}

// A request with a valid cookie keeps it and gets the same token.
func TestTokenStable(t *testing.T) {
	t.Parallel()
	h, _, _ := protected(t, nil)
	cookie, token := issue(t, h)
	req := httptest.NewRequest(http.MethodGet, "/ops/runs", nil)
	req.AddCookie(cookie)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if len(rec.Result().Cookies()) != 0 {
		t.Errorf("a request with a valid cookie got a new one")
	}
	if rec.Body.String() != token {
		t.Errorf("token changed between requests of one browser")
	}
}

func TestNewRejectsShortKey(t *testing.T) {
	t.Parallel()
	if _, err := csrf.New([]byte("short"), "/", nil); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("New with a 5-byte key: %v", err)
	}
}
