package worker

import (
	"encoding/json"

	"github.com/jobgate/jobgate/internal/schema"
)

// generateSchema derives a params schema from T's struct: required from
// json tags without omitempty, bounds from jsonschema tags.
func generateSchema(v any) (json.RawMessage, error) {
	return schema.Generate(v)
}

// checkSchema refuses, before anything is declared, a schema a gateway
// would not accept (not 2020-12, remote references, unbounded strings or
// arrays, open objects, defaults that do not validate).
func checkSchema(raw json.RawMessage) error {
	_, err := schema.Compile(raw)
	return err
}
