package sales

import (
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

// Params are what a client sends in "params". The jsonschema tags bound
// every string and array (the gateway refuses unbounded schemas) and give
// the defaults the gateway applies before it fingerprints the request.
// Commas cannot appear inside a tag value, hence the terse descriptions.
type Params struct {
	Region   string   `json:"region" jsonschema:"minLength=1,maxLength=64,pattern=^[A-Za-z][A-Za-z0-9 _-]*$,description=Sales region: a letter then letters/digits/space/_/-"`
	From     string   `json:"from" jsonschema:"format=date,minLength=10,maxLength=10,description=First day (YYYY-MM-DD)"`
	To       string   `json:"to" jsonschema:"format=date,minLength=10,maxLength=10,description=Last day (YYYY-MM-DD) inclusive; at most 2 years after from"`
	Currency string   `json:"currency,omitempty" jsonschema:"enum=EUR,enum=USD,enum=GBP,default=EUR,description=Currency of the amounts"`
	Products []string `json:"products,omitempty" jsonschema:"maxItems=20,uniqueItems=true,pattern=^[A-Z]{3}-[0-9]{3}$,minLength=7,maxLength=7,description=Only these product codes (default: all)"`
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
