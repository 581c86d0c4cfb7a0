package gateway

import (
	"github.com/gofiber/fiber/v2"
)

// The operator console: /admin serves web/admin.html, whose script and
// style come from /ui/ like the reviewer page's, with the same headers (a
// Content-Security-Policy that allows only this origin and no inline code,
// nosniff, no referrer, no framing). The page holds no data of its own: it
// signs in with an operator or tenant admin token pasted into it and reads
// everything through the admin API, which checks the role on every call.

// consoleFile is the console's page among the embedded files; it is served
// only at /admin, not under /ui/.
const consoleFile = "admin.html"

// consoleRoutes serves the console at /admin (Fiber's routing is not
// strict, so /admin/ too).
func (g *Gateway) consoleRoutes(assets map[string]*pageAsset) {
	page := assets[consoleFile]
	delete(assets, consoleFile)
	if page == nil {
		panic("embedded console has no " + consoleFile) // a build defect
	}
	g.app.Get("/admin", func(c *fiber.Ctx) error { return serveAsset(c, page) })
}
