package failpoint

// Planted bugs: places where action "error" makes a component break one of
// jobgate's promises on purpose, so that a test can show its checker
// catches the break (docs/reliability.md, "A planted bug"). Never set
// outside such a test.
const (
	// GatewayAdmitUnchecked makes admission of a key this gateway has not
	// seen write its record over the one the key already has, as an
	// admission that believed a lagging replica's "no such key" would: a
	// second 202 for the key, and the job back to queued.
	GatewayAdmitUnchecked = "gateway.admit-unchecked"
)
