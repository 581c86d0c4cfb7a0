package sales

import (
	"bufio"
	"context"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// The sales data are synthetic: this example has no database. Every day of
// every region has its own seeded generator, so an export is a pure
// function of its params, the same day reads the same in any range that
// covers it, and the row count is known before the first row is written.

type product struct {
	code, name string
	cents      int64 // list price in EUR cents
}

// catalog is what the stores sell. Some names hold commas and quotes, so
// the CSV quoting is exercised by every export.
var catalog = []product{
	{"CHR-101", "Office chair, mesh", 14900},
	{"CHR-102", "Office chair, leather", 24900},
	{"DSK-201", "Standing desk 160 cm", 49900},
	{"DSK-202", "Desk 120 cm", 18900},
	{"LMP-301", "Desk lamp LED", 3990},
	{"MON-401", `Monitor 27"`, 27900},
	{"MON-402", `Monitor 32" 4K`, 45900},
	{"KBD-501", "Keyboard, wireless", 5990},
	{"MSE-502", "Mouse, wireless", 2990},
	{"CBL-601", "HDMI cable 2 m", 1290},
	{"CBL-602", "USB-C cable 1 m", 990},
	{"DOC-701", "Docking station", 16900},
	{"HDS-801", "Headset with microphone", 7990},
	{"CAM-802", "Webcam 1080p", 6490},
	{"PRN-901", "Laser printer", 21900},
	{"PAP-902", "Paper A4, 500 sheets", 590},
	{"INK-903", "Toner cartridge, black", 6990},
	{"SHF-111", "Bookshelf, 5 shelves", 12900},
	{"FIL-112", "Filing cabinet, 3 drawers", 15900},
	{"WBD-113", "Whiteboard 120 x 90 cm", 8990},
	{"CHR-103", "Visitor chair", 6900},
	{"LCK-114", "Locker, 4 doors", 22900},
	{"PLT-115", "Plant pot, large", 3490},
	{"BIN-116", "Recycling bin 60 l", 4590},
	{"COF-121", "Coffee machine", 39900},
	{"MUG-122", "Mug, set of 6", 1990},
	{"KET-123", "Kettle 1.7 l", 2990},
	{"FRG-124", "Fridge, under-counter", 29900},
	{"PWR-631", "Power strip, 6 sockets", 2490},
	{"UPS-632", "UPS 1500 VA", 18900},
}

var productIndex = func() map[string]int {
	m := make(map[string]int, len(catalog))
	for i, p := range catalog {
		m[p.code] = i
	}
	return m
}()

type currency struct {
	code string
	rate int64 // per 10 000 EUR (fixed example rates)
}

var currencies = [...]currency{{"EUR", 10000}, {"USD", 10850}, {"GBP", 8570}}

// sep separates cells.
const sep = ','

// vatPercent is the tax rate applied to every sale.
const vatPercent = 20

// columns name the cells of a row; they are the export's first line.
var columns = []string{
	"order_id", "date", "time", "region", "store", "channel", "product_code", "product_name",
	"quantity", "unit_price", "discount_pct", "net_amount", "tax_amount", "gross_amount", "currency",
}

var channels = [...]string{"store", "store", "store", "store", "store", "store", "web", "web", "web", "phone"}

var discounts = [...]int64{0, 0, 0, 0, 5, 10, 15}

// Export is one export, ready to write.
type Export struct {
	region   string
	from     time.Time
	days     int
	currency currency
	products []int // catalog indexes to sell; nil = the whole catalog

	seed       uint64   // of the region
	base       int      // the region's least orders per day
	regionCell []byte   // the region as a CSV cell
	regionCode []byte   // 4 hex digits in order ids
	names      [][]byte // product names as CSV cells
	prices     []int64  // unit prices in the currency's cents
	pcg        rand.PCG
	rng        *rand.Rand // on pcg, re-seeded per day
}

func (e *Export) prepare() {
	h := fnv.New64a()
	h.Write([]byte(e.region))
	e.seed = h.Sum64()
	e.base = 100 + int(e.seed%100)
	e.regionCell = appendCell(nil, e.region)
	e.regionCode = strconv.AppendUint(nil, 0x1000+e.seed%0xF000, 16)
	e.names = make([][]byte, len(catalog))
	e.prices = make([]int64, len(catalog))
	for i, p := range catalog {
		e.names[i] = appendCell(nil, p.name)
		e.prices[i] = (p.cents*e.currency.rate + 5000) / 10000
	}
	e.rng = rand.New(&e.pcg)
}

// Rows is how many rows (besides the header) the export has.
func (e *Export) Rows() int64 {
	var n int64
	for d := range e.days {
		n += int64(e.startDay(d))
	}
	return n
}

// Days is how many days the export covers.
func (e *Export) Days() int { return e.days }

// startDay seeds the generator for day d of the range and returns the
// day's number of rows.
func (e *Export) startDay(d int) int {
	day := e.from.AddDate(0, 0, d)
	e.pcg.Seed(e.seed, uint64(day.Unix()/86400))
	orders := e.base + e.rng.IntN(100)
	if e.products == nil {
		return orders
	}
	// Only the chosen products' share of the day's orders.
	return (orders*len(e.products) + len(catalog) - 1) / len(catalog)
}

// Write streams the export to w: the header, then the rows day by day. It
// holds one row at a time (plus w's buffer), checks ctx and reports the
// rows done every few thousand rows, and returns how many rows it wrote.
func (e *Export) Write(ctx context.Context, w io.Writer, progress func(rows int64)) (int64, error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	b := make([]byte, 0, 512)
	for i, c := range columns {
		if i > 0 {
			b = append(b, sep)
		}
		b = append(b, c...)
	}
	b = append(b, '\n')
	if _, err := bw.Write(b); err != nil {
		return 0, err
	}
	var done int64
	var date [10]byte
	for d := range e.days {
		n := e.startDay(d)
		day := e.from.AddDate(0, 0, d)
		day.AppendFormat(date[:0], dateLayout)
		span := 12 * 3600 / n // the day's orders spread over 08:00-20:00
		for i := range n {
			b = e.appendRow(b[:0], date[:], i, 8*3600+i*span+e.rng.IntN(max(span, 1)))
			if _, err := bw.Write(b); err != nil {
				return done, err
			}
			done++
			if done%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return done, err
				}
				if progress != nil {
					progress(done)
				}
			}
		}
	}
	if err := bw.Flush(); err != nil {
		return done, err
	}
	if progress != nil {
		progress(done)
	}
	return done, nil
}

// appendRow appends row i of a day (the generator positioned on it).
func (e *Export) appendRow(b, date []byte, i, second int) []byte {
	rng := e.rng
	var p int
	if e.products == nil {
		p = rng.IntN(len(catalog))
	} else {
		p = e.products[rng.IntN(len(e.products))]
	}
	store := 1 + rng.IntN(24)
	channel := channels[rng.IntN(len(channels))]
	qty := int64(1 + rng.IntN(3))
	if rng.IntN(10) == 0 {
		qty += int64(rng.IntN(20)) // the odd bulk order
	}
	disc := discounts[rng.IntN(len(discounts))]
	unit := e.prices[p]
	net := (unit*qty*(100-disc) + 50) / 100
	tax := (net*vatPercent + 50) / 100

	// order_id: SO-<yyyymmdd>-<region code>-<nnnnn>
	b = append(b, "SO-"...)
	b = append(b, date[0:4]...)
	b = append(b, date[5:7]...)
	b = append(b, date[8:10]...)
	b = append(b, '-')
	b = append(b, e.regionCode...)
	b = append(b, '-')
	b = appendPadded(b, int64(i+1), 5)
	b = append(b, sep)
	b = append(b, date...)
	b = append(b, sep)
	b = appendPadded(b, int64(second/3600), 2)
	b = append(b, ':')
	b = appendPadded(b, int64(second/60%60), 2)
	b = append(b, ':')
	b = appendPadded(b, int64(second%60), 2)
	b = append(b, sep)
	b = append(b, e.regionCell...)
	b = append(b, sep)
	b = append(b, "ST-"...)
	b = appendPadded(b, int64(store), 3)
	b = append(b, sep)
	b = append(b, channel...)
	b = append(b, sep)
	b = append(b, catalog[p].code...)
	b = append(b, sep)
	b = append(b, e.names[p]...)
	b = append(b, sep)
	b = strconv.AppendInt(b, qty, 10)
	b = append(b, sep)
	b = appendMoney(b, unit)
	b = append(b, sep)
	b = strconv.AppendInt(b, disc, 10)
	b = append(b, sep)
	b = appendMoney(b, net)
	b = append(b, sep)
	b = appendMoney(b, tax)
	b = append(b, sep)
	b = appendMoney(b, net+tax)
	b = append(b, sep)
	b = append(b, e.currency.code...)
	return append(b, '\n')
}

// appendPadded appends n with leading zeros to width digits.
func appendPadded(b []byte, n int64, width int) []byte {
	for p := int64(10); width > 1; width-- {
		if n < p {
			b = append(b, '0')
		}
		p *= 10
	}
	return strconv.AppendInt(b, n, 10)
}

// appendMoney appends cents as units with two decimals: 12345 -> 123.45.
func appendMoney(b []byte, cents int64) []byte {
	b = strconv.AppendInt(b, cents/100, 10)
	b = append(b, '.')
	return appendPadded(b, cents%100, 2)
}

// appendCell appends s as one CSV cell (RFC 4180): quoted when it holds a
// comma, a quote or a line break, with quotes doubled.
func appendCell(b []byte, s string) []byte {
	if !strings.ContainsAny(s, ",\"\r\n") {
		return append(b, s...)
	}
	b = append(b, '"')
	for i := range len(s) {
		if s[i] == '"' {
			b = append(b, '"')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}
