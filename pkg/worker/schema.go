package worker

import (
	"encoding/json"
	"errors"
)

// generateSchema derives a params schema from T.
func generateSchema(v any) (json.RawMessage, error) {
	return nil, errors.New("Schema is required")
}

// checkSchema refuses a schema a gateway would not accept.
func checkSchema(raw json.RawMessage) error {
	if !json.Valid(raw) {
		return errors.New("not valid JSON")
	}
	return nil
}
