package archtest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDomainLinksNoCodecOrHTTP: internal/job is the domain (the record, its
// states and transitions, the fingerprint's inputs, the errors), and links
// neither the record's codecs (internal/codec imports it, not the other
// way) nor any HTTP (the map from errors to problems is the gateway's),
// nor a service: it is what every one of them shares.
func TestDomainLinksNoCodecOrHTTP(t *testing.T) {
	t.Parallel()
	pkgs := load(t)
	p := pkgs[module+"/internal/job"]
	require.NotNil(t, p)
	forbidden := []string{"net/http", module + "/internal/codec", "github.com/gofiber/", "github.com/valyala/fasthttp"}
	for _, svc := range services {
		forbidden = append(forbidden, module+"/"+svc)
	}
	for _, dep := range p.Deps {
		for _, f := range forbidden {
			if dep == strings.TrimSuffix(f, "/") || strings.HasPrefix(dep, strings.TrimSuffix(f, "/")+"/") {
				t.Errorf("internal/job depends on %s: the domain links no codec, HTTP or service; put it in internal/codec or the gateway", dep)
			}
		}
	}
}
