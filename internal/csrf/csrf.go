// Package csrf refuses state-changing HTTP requests that do not carry a
// token only the pages of the same site could have read.
//
// It is a signed double-submit scheme: each browser gets a cookie holding a
// random nonce, and the token is the HMAC of that nonce under a server key.
// A POST, PUT, PATCH or DELETE must send the cookie and the token (the form
// field csrf_token or the header X-CSRF-Token). Another site can make a
// browser send the cookie but cannot read it or the token, and a script
// without the cookie (a bare curl) has neither, so both are refused.
// Signing the nonce means a cookie planted by a sibling subdomain is of no
// use without the key.
//
// It complements net/http.CrossOriginProtection, which refuses cross-origin
// browser requests by their Sec-Fetch-Site and Origin headers but lets
// through any request that has neither. It imports the standard library
// only.
package csrf

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
)

// Names of the cookie, the form field and the header.
const (
	CookieName = "flowlite_csrf"
	FieldName  = "csrf_token"
	HeaderName = "X-CSRF-Token"
)

// nonceBytes is the size of a cookie's random nonce.
const nonceBytes = 32

// Errors a refused request is refused with.
var (
	ErrNoCookie     = errors.New("no CSRF cookie: load a page of the dashboard (or GET the API's csrf endpoint) first, and send its cookie")
	ErrNoToken      = errors.New("no CSRF token: send the form field " + FieldName + " or the header " + HeaderName)
	ErrTokenInvalid = errors.New("CSRF token does not match the cookie")
)

// Protector issues and checks tokens.
type Protector struct {
	key  []byte
	path string
	deny func(http.ResponseWriter, *http.Request, error)
}

// New returns a Protector signing with key (at least 32 bytes; nil: a
// random key, so tokens last as long as the process), whose cookie is
// scoped to path ("/" when empty). deny writes the refusal of a request
// that failed the check, given why.
func New(key []byte, path string, deny func(http.ResponseWriter, *http.Request, error)) (*Protector, error) {
	if key == nil {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("csrf: generate key: %w", err)
		}
	}
	if len(key) < 32 {
		return nil, fmt.Errorf("csrf: key of %d bytes, want at least 32", len(key))
	}
	if path == "" {
		path = "/"
	}
	return &Protector{key: key, path: path, deny: deny}, nil
}

type tokenKey struct{}

// Token returns the token of the request, which Handler put in its
// context; "" outside Handler.
func Token(r *http.Request) string {
	s, _ := r.Context().Value(tokenKey{}).(string)
	return s
}

// Safe reports whether method changes no state by HTTP's rules, so needs
// no token.
func Safe(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// Handler checks the token of every state-changing request before next
// sees it, and gives every request a token (setting the cookie when the
// browser has none) that Token returns.
func (p *Protector) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		nonce := ""
		if c, err := r.Cookie(CookieName); err == nil && validNonce(c.Value) {
			nonce = c.Value
		}
		if !Safe(r.Method) {
			if err := p.check(r, nonce); err != nil {
				p.deny(w, r, err)
				return
			}
		}
		if nonce == "" {
			b := make([]byte, nonceBytes)
			if _, err := rand.Read(b); err != nil {
				http.Error(w, "csrf: generate nonce: "+err.Error(), http.StatusInternalServerError)
				return
			}
			nonce = base64.RawURLEncoding.EncodeToString(b)
			http.SetCookie(w, &http.Cookie{
				Name: CookieName, Value: nonce, Path: p.path,
				HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
			})
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenKey{}, p.sign(nonce))))
	})
}

func (p *Protector) check(r *http.Request, nonce string) error {
	if nonce == "" {
		return ErrNoCookie
	}
	got := r.Header.Get(HeaderName)
	if got == "" {
		got = r.PostFormValue(FieldName)
	}
	if got == "" {
		return ErrNoToken
	}
	if !hmac.Equal([]byte(got), []byte(p.sign(nonce))) {
		return ErrTokenInvalid
	}
	return nil
}

func (p *Protector) sign(nonce string) string {
	m := hmac.New(sha256.New, p.key)
	m.Write([]byte("flowlite csrf\x00"))
	m.Write([]byte(nonce))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func validNonce(s string) bool {
	b, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil && len(b) == nonceBytes
}
