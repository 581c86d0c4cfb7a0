package renderer

import "encoding/json"

// TypeName is the job type this renderer runs.
const TypeName = "permit_report"

// reportParams are the params of a permit_report job, as the gateway stored
// them (validated against Schema, defaults applied).
type reportParams struct {
	CaseID   int64 `json:"case_id"`
	Revision int64 `json:"revision"`
	Pages    int   `json:"pages"`
}

// Schema is permit_report's params schema, as the contract states it:
// case_id and revision integers ≥ 1 (required), pages 1–2000 (default 10),
// nothing else.
var Schema = json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "permit_report params",
  "type": "object",
  "additionalProperties": false,
  "required": ["case_id", "revision"],
  "properties": {
    "case_id": {"type": "integer", "minimum": 1, "maximum": 9007199254740991, "description": "the permit case"},
    "revision": {"type": "integer", "minimum": 1, "maximum": 9007199254740991, "description": "the case revision to report on"},
    "pages": {"type": "integer", "minimum": 1, "maximum": 2000, "default": 10, "description": "pages of the report"}
  }
}`)
