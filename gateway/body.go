package gateway

import (
	"bytes"

	"github.com/gofiber/fiber/v2"
	"github.com/jobgate/jobgate/internal/job"
)

var (
	contentEncodingHeader = []byte(fiber.HeaderContentEncoding)
	identityCoding        = []byte("identity")
)

// refuseContentCoding answers 415 to any request whose body carries a
// content coding other than identity, before any route reads the body.
//
// Decoding is where a compressed body becomes dangerous: Fiber's c.Body()
// undoes every listed coding (gzip, deflate, br, zstd) with no limit on the
// decoded size, and fasthttp's form parsing gunzips a multipart body on its
// own. A few hundred bytes of "gzip, gzip" decode to gigabytes. The transport
// limit (transportBodyLimit) bounds the bytes on the wire only, so the
// gateway accepts identity bodies and nothing else; handlers read the body
// with c.BodyRaw(), which never decodes.
func refuseContentCoding(c *fiber.Ctx) error {
	var bad []byte
	c.Request().Header.VisitAll(func(k, v []byte) {
		if bad != nil || !bytes.EqualFold(k, contentEncodingHeader) {
			return
		}
		for part := range bytes.SplitSeq(v, []byte(",")) {
			coding := bytes.TrimSpace(part)
			if len(coding) > 0 && !bytes.EqualFold(coding, identityCoding) {
				bad = coding
				return
			}
		}
	})
	if bad == nil {
		return c.Next()
	}
	// RFC 9110 15.5.16: a 415 for a content coding names the codings that
	// would have been accepted.
	c.Set(fiber.HeaderAcceptEncoding, "identity")
	return writeProblem(c, job.Userf(errUnsupportedMedia, "Content-Encoding %q is not accepted; send the body uncompressed", truncate(bad, 32)))
}

// truncate keeps a client-supplied value short enough to echo in a problem.
func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
