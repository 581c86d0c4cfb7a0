package job

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/jobgate/jobgate/pkg/api"
)

// FlowKey is one limit a start of a job must pass under its type's flow
// control (api.Flow): a concurrency entry's key in JOBGATE_SLOTS with its
// limit, or (Rate set) its rate bucket's key. The broker takes them; the
// admin API reads them to say what a waiting job waits for.
type FlowKey struct {
	Key   string
	Class string // "tenant", "requester", "params" or "rate"
	Limit int
	Rate  *api.RateLimit
}

// FlowKeys are the limits rec's starts pass under d: its concurrency
// entries, then its rate bucket; none when d declares neither.
func FlowKeys(d *TypeDecl, rec *Record) []FlowKey {
	if len(d.Concurrency) == 0 && d.RateLimit == nil {
		return nil
	}
	keys := make([]FlowKey, 0, len(d.Concurrency)+1)
	for _, c := range d.Concurrency {
		keys = append(keys, ConcurrencyKeyOf(d.Name, c, rec))
	}
	if r := d.RateLimit; r != nil {
		k := "fr." + d.Name + ".all.x"
		if r.KeyOr() == api.KeyTenant {
			k = "fr." + d.Name + ".t." + flowDigest(rec.Tenant)
		}
		keys = append(keys, FlowKey{Key: k, Class: "rate", Rate: r})
	}
	return keys
}

// ConcurrencyKeyOf is the entry of c's value for rec. A value read from
// the params counts within the job's tenant: another tenant's params,
// however alike, never take this tenant's places.
func ConcurrencyKeyOf(typ string, c api.ConcurrencyKey, rec *Record) FlowKey {
	switch c.Key {
	case api.KeyTenant:
		return FlowKey{Key: "fc." + typ + ".t." + flowDigest(rec.Tenant), Class: "tenant", Limit: c.Limit}
	case api.KeyRequester:
		return FlowKey{Key: "fc." + typ + ".r." + flowDigest(rec.Tenant+"\x00"+rec.Requester), Class: "requester", Limit: c.Limit}
	}
	v := paramValue(rec.Params, strings.TrimPrefix(c.Key, api.KeyParamsPrefix))
	return FlowKey{Key: "fc." + typ + ".p" + flowDigest(c.Key)[:12] + "." + flowDigest(rec.Tenant+"\x00"+string(v)),
		Class: "params", Limit: c.Limit}
}

// flowDigest names a value in a key: 96 bits of its SHA-256, hex (keys
// never hold raw ids or params).
func flowDigest(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:12])
}

// paramValue is the JSON value at pointer (RFC 6901, without its leading
// "/params/") in params, in Go's encoding of it (object keys sorted), or
// null when there is none.
func paramValue(params json.RawMessage, pointer string) []byte {
	var v any
	if json.Unmarshal(params, &v) != nil {
		return []byte("null")
	}
	for _, tok := range strings.Split(pointer, "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := v.(type) {
		case map[string]any:
			v = x[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) || (len(tok) > 1 && tok[0] == '0') {
				return []byte("null")
			}
			v = x[i]
		default:
			return []byte("null")
		}
	}
	out, err := json.Marshal(v)
	if err != nil {
		return []byte("null")
	}
	return out
}
