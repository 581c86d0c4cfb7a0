package sales

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// What the example declares about its job type.
const (
	TypeName    = "export_sales_report"
	Description = "Sales of one region over a date range as CSV, optionally of some products only"
	ContentType = "text/csv; charset=utf-8"
	// MaxResultBytes bounds one export; the longest range of the busiest
	// region stays well below it (a test checks).
	MaxResultBytes = 64 << 20
)

// Schema is the JSON Schema (2020-12) of Params, hand-written: it bounds
// every string and array (the gateway refuses unbounded schemas), gives the
// default the gateway applies before it fingerprints a request, and its
// descriptions let a web app build a form from GET /v1/types. What it
// cannot say (to on or after from, known product codes) New checks.
//
//go:embed schema.json
var Schema json.RawMessage

// Params are what a client sends in "params" (see Schema).
type Params struct {
	Region   string   `json:"region"`
	From     string   `json:"from"`
	To       string   `json:"to"`
	Currency string   `json:"currency,omitempty"`
	Products []string `json:"products,omitempty"`
}

// MaxDays is the longest date range one export covers.
const MaxDays = 2*365 + 1

// ErrInvalid marks params the schema lets through but no export can
// serve (to before from, an unknown product): retrying cannot help.
var ErrInvalid = errors.New("invalid export params")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

const dateLayout = "2006-01-02"

// New checks params and prepares the export they ask for.
func New(p Params) (*Export, error) {
	if p.Region == "" || len(p.Region) > 64 || !validRegion(p.Region) {
		return nil, invalid("region must be a letter then up to 63 letters, digits, spaces, _ or -")
	}
	from, err := time.Parse(dateLayout, p.From)
	if err != nil {
		return nil, invalid("from is not a date (YYYY-MM-DD): %q", truncate(p.From))
	}
	to, err := time.Parse(dateLayout, p.To)
	if err != nil {
		return nil, invalid("to is not a date (YYYY-MM-DD): %q", truncate(p.To))
	}
	if to.Before(from) {
		return nil, invalid("to (%s) is before from (%s)", p.To, p.From)
	}
	days := int(to.Sub(from)/(24*time.Hour)) + 1
	if days > MaxDays {
		return nil, invalid("the range covers %d days; at most %d", days, MaxDays)
	}
	e := &Export{region: p.Region, from: from, days: days}
	switch p.Currency {
	case "", "EUR":
		e.currency = currencies[0]
	case "USD":
		e.currency = currencies[1]
	case "GBP":
		e.currency = currencies[2]
	default:
		return nil, invalid("currency must be EUR, USD or GBP")
	}
	if len(p.Products) > 20 {
		return nil, invalid("at most 20 products")
	}
	seen := map[int]bool{}
	for _, code := range p.Products {
		i, ok := productIndex[code]
		if !ok {
			return nil, invalid("unknown product code %q", truncate(code))
		}
		if !seen[i] {
			seen[i] = true
			e.products = append(e.products, i)
		}
	}
	e.prepare()
	return e, nil
}

// validRegion: a letter, then letters, digits, space, '_' or '-'. A region
// starts with a letter so that no cell can begin with = + - @ and be taken
// for a formula by a spreadsheet.
func validRegion(s string) bool {
	for i := range len(s) {
		c := s[i]
		letter := c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'
		if i == 0 && !letter {
			return false
		}
		if !letter && !(c >= '0' && c <= '9') && c != ' ' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// truncate keeps a refused value short (and valid UTF-8) in an error
// message.
func truncate(s string) string {
	if len(s) > 20 {
		return strings.ToValidUTF8(s[:20], "?") + "..."
	}
	return strings.ToValidUTF8(s, "?")
}
