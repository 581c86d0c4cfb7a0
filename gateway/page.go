package gateway

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/job"
)

// webFiles is the reviewer's page: plain HTML, CSS and JavaScript, embedded
// so the binary serves it without a build step or a CDN.
//
//go:embed web
var webFiles embed.FS

// devTokenTTL is the lifetime of a token from the development sign-in: one
// working session, not a credential worth keeping.
const devTokenTTL = time.Hour

// pageCSP lets the page load only its own files and talk only to this
// origin; it has no inline script or style, so none is allowed. With
// Referrer-Policy no-referrer a signed result link never leaks onwards.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// pageAsset is one file of the page, ready to serve.
type pageAsset struct {
	body  []byte
	ctype string
	etag  string
}

var assetTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
}

// pageRoutes serves the page at / and its files under /ui/, the operator
// console at /admin (console.go), and, only in
// development mode (`jobgate serve --dev`), the sign-in helper /dev/token.
func (g *Gateway) pageRoutes() {
	assets := loadPageAssets(g.cfg.Dev)
	index := assets["index.html"]
	delete(assets, "index.html")
	g.consoleRoutes(assets)
	a := g.app
	a.Get("/", func(c *fiber.Ctx) error { return serveAsset(c, index) })
	a.Get("/ui/:file", func(c *fiber.Ctx) error {
		asset, ok := assets[c.Params("file")]
		if !ok {
			return writeProblem(c, fmt.Errorf("page file: %w", job.ErrNotFound))
		}
		return serveAsset(c, asset)
	})
	if g.cfg.Dev { // New refused it on anything but a loopback address
		a.Post("/dev/token", g.devToken)
	}
}

// loadPageAssets reads the embedded files once per gateway. The page learns
// whether the development sign-in exists from its body tag, so it never has
// to probe for it.
func loadPageAssets(dev bool) map[string]*pageAsset {
	entries, err := fs.ReadDir(webFiles, "web")
	if err != nil {
		panic(fmt.Sprintf("embedded page missing: %v", err)) // a build defect, not a runtime condition
	}
	out := make(map[string]*pageAsset, len(entries))
	for _, e := range entries {
		name := e.Name()
		ctype, ok := assetTypes[path.Ext(name)]
		if e.IsDir() || !ok {
			continue
		}
		body, err := webFiles.ReadFile("web/" + name)
		if err != nil {
			panic(fmt.Sprintf("embedded page file %s: %v", name, err))
		}
		if name == "index.html" && dev {
			body = bytes.Replace(body, []byte(`data-dev="false"`), []byte(`data-dev="true"`), 1)
		}
		sum := sha256.Sum256(body)
		out[name] = &pageAsset{body: body, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
	}
	if out["index.html"] == nil {
		panic("embedded page has no index.html")
	}
	return out
}

// serveAsset sends a page file. no-cache (revalidate every time, cheap with
// the ETag) means a new release is picked up by the next reload.
func serveAsset(c *fiber.Ctx, a *pageAsset) error {
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set(fiber.HeaderETag, a.etag)
	c.Set(fiber.HeaderContentSecurityPolicy, pageCSP)
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set(fiber.HeaderReferrerPolicy, "no-referrer")
	c.Set(fiber.HeaderXFrameOptions, "DENY")
	if inm := c.Get(fiber.HeaderIfNoneMatch); inm != "" {
		for _, part := range strings.Split(inm, ",") {
			if p := strings.TrimPrefix(strings.TrimSpace(part), "W/"); p == a.etag || p == "*" {
				return c.SendStatus(http.StatusNotModified)
			}
		}
	}
	c.Set(fiber.HeaderContentType, a.ctype)
	return c.Send(a.body)
}

// devTokenResponse is the body of POST /dev/token.
type devTokenResponse struct {
	Token     string    `json:"token"`
	TokenType string    `json:"token_type"`
	ExpiresAt time.Time `json:"expires_at"`
	Tenant    string    `json:"tenant"`
	Subject   string    `json:"subject"`
}

// devToken is POST /dev/token (development mode only): a short-lived bearer
// token for the tenant and subject of a form, signed with the gateway's own
// secret, so a developer can try the page without the token command.
func (g *Gateway) devToken(c *fiber.Ctx) error {
	// The listener is loopback (CheckDev), but a page on any site can make
	// the developer's browser post here under a name of its own that
	// resolves to 127.0.0.1 (DNS rebinding): only the loopback names are
	// this server's.
	if !loopbackHost(string(c.Request().Host())) {
		return writeProblem(c, job.Userf(job.ErrForbidden, "the development sign-in answers only requests to 127.0.0.1, localhost or [::1]"))
	}
	mt, _, err := mime.ParseMediaType(c.Get(fiber.HeaderContentType))
	if err != nil || (mt != fiber.MIMEApplicationForm && mt != fiber.MIMEMultipartForm) {
		return writeProblem(c, job.Userf(errUnsupportedMedia, "send a form (application/x-www-form-urlencoded)"))
	}
	tenant := strings.Clone(c.FormValue("tenant"))
	subject := strings.Clone(c.FormValue("subject"))
	var bad []job.FieldError
	if !job.ValidScopeID(tenant) {
		bad = append(bad, job.FieldError{Field: "tenant", Message: "must match [A-Za-z0-9_-]{1,64}"})
	}
	if !job.ValidScopeID(subject) {
		bad = append(bad, job.FieldError{Field: "subject", Message: "must match [A-Za-z0-9_-]{1,64}"})
	}
	if len(bad) > 0 {
		return writeProblem(c, &job.ValidationError{Errors: bad})
	}
	now := g.cfg.Now()
	tok, err := auth.Mint(g.cfg.AuthSecret, auth.Identity{Tenant: tenant, Requester: subject}, devTokenTTL, now, g.cfg.authOptions()...)
	if err != nil {
		return writeProblem(c, err)
	}
	g.log.Info("development token minted", "tenant", tenant, "subject", subject, "ttl", devTokenTTL)
	body, err := jsonMarshal(devTokenResponse{
		Token: tok, TokenType: "Bearer", ExpiresAt: now.Add(devTokenTTL).UTC().Truncate(time.Second),
		Tenant: tenant, Subject: subject,
	})
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(body)
}

// CheckDev refuses development mode (the /dev/token sign-in, which mints a
// token for anyone who can reach it) on an address other machines reach.
func CheckDev(addr string, dev bool) error {
	if dev && !loopback(addr) {
		return fmt.Errorf("development mode (--dev, JOBGATE_DEV, dev: true) mints tokens for anyone who can reach %s: "+
			"it needs a loopback address such as 127.0.0.1:8080", addr)
	}
	return nil
}

// loopback reports whether a listen address only accepts local clients.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackHost reports whether a request's Host header names this machine's
// loopback interface: 127.0.0.1, localhost or [::1], with or without a port.
func loopbackHost(host string) bool {
	name, port := host, ""
	if strings.HasPrefix(host, "[") {
		end := strings.IndexByte(host, ']')
		if end < 0 {
			return false
		}
		name, port = host[1:end], host[end+1:]
		ip := net.ParseIP(name)
		if ip == nil || ip.To4() != nil || !ip.Equal(net.IPv6loopback) {
			return false
		}
	} else {
		if i := strings.IndexByte(host, ':'); i >= 0 {
			name, port = host[:i], host[i:]
		}
		if name != "127.0.0.1" && !strings.EqualFold(name, "localhost") {
			return false
		}
	}
	if port == "" {
		return true
	}
	digits := strings.TrimPrefix(port, ":")
	if digits == port || digits == "" || len(digits) > 5 {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
