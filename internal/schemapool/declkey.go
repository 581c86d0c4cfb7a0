package schemapool

import (
	"crypto/sha256"
	"encoding/json"
	"time"

	"github.com/jobgate/jobgate/internal/job"
)

// DeclKey identifies a declaration as its declarer wrote it: every field,
// its schema by KeyOf, but not when it was stored, by which credential,
// or an operator's pause. Two declarations with the same key need no
// compile, no write and no new version of the type anywhere.
func DeclKey(d *job.TypeDecl) Key {
	x := *d
	x.DeclaredAt, x.Owner, x.Paused, x.Schema = time.Time{}, "", false, nil
	data, _ := json.Marshal(&x) // plain fields: it cannot fail
	k := KeyOf(d.Schema)
	return sha256.Sum256(append(data, k[:]...))
}
