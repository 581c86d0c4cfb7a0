package renderer

// The inspection checks a permit report records: what is measured, in which
// section of the building it belongs, in which unit, against which limit and
// which way the limit points. The limits are typical of residential and
// small commercial codes (stairs, guarding, accessibility, ventilation,
// energy, wiring); a report does not claim a particular jurisdiction.

// limitKind says which side of the limit complies.
type limitKind uint8

const (
	// atMost: the measured value complies when it is not above the limit
	// (riser height max 190 mm, U-value max 1.40 W/m²K).
	atMost limitKind = iota
	// atLeast: the measured value complies when it is not below the limit
	// (handrail height min 900 mm, air change rate min 0.50 ACH).
	atLeast
)

// Section indexes, in report order.
const (
	secStructural = iota
	secFoundations
	secFire
	secEgress
	secElectrical
	secPlumbing
	secVentilation
	secAccessibility
	secEnergy
	secSite
	numSections
)

var sectionNames = [numSections]string{
	secStructural:    "Structural frame",
	secFoundations:   "Foundations",
	secFire:          "Fire separation",
	secEgress:        "Means of egress",
	secElectrical:    "Electrical service",
	secPlumbing:      "Plumbing and drainage",
	secVentilation:   "Mechanical ventilation",
	secAccessibility: "Accessibility",
	secEnergy:        "Energy envelope",
	secSite:          "Site works",
}

// check is one kind of inspection item.
//
// Values are compared at the precision they are printed with (dec
// decimals), so the result a reader sees always follows from the numbers on
// the page. A compliant value within tol of the limit is an Observation: it
// passes, but by less than the measurement tolerance, so it is to be
// re-measured before sign-off. A value beyond the limit fails, however
// close.
type check struct {
	name    string
	section int
	unit    string // as printed; "" for ratios (printed as 1:x)
	kind    limitKind
	limit   float64
	tol     float64 // observation band, in the unit
	lo, hi  float64 // realistic range of measured values (triangular between them)
	dec     int     // decimals printed
	// steps, if set, are the only values that occur (ratings come in
	// standard sizes); drawn uniformly, repeats weight a value.
	steps []float64
	// ratio: the value is x of a gradient 1:x. A larger x is a shallower
	// slope, so "max gradient 1:12" is x atLeast 12 and "min fall 1:80" is
	// x atMost 80.
	ratio bool
}

var checks = []check{
	// Structural frame
	{name: "Beam bearing length", section: secStructural, unit: "mm", kind: atLeast, limit: 100, tol: 5, lo: 88, hi: 160, dec: 0},
	{name: "Beam deflection at midspan (6 m)", section: secStructural, unit: "mm", kind: atMost, limit: 16.7, tol: 0.5, lo: 7, hi: 18.5, dec: 1},
	{name: "Column out-of-plumb per storey", section: secStructural, unit: "mm", kind: atMost, limit: 10, tol: 1, lo: 1, hi: 12, dec: 1},
	{name: "Concrete cube strength, 28 days", section: secStructural, unit: "N/mm²", kind: atLeast, limit: 37, tol: 1.5, lo: 34, hi: 52, dec: 1},
	{name: "Hold-down anchor spacing", section: secStructural, unit: "mm", kind: atMost, limit: 600, tol: 10, lo: 480, hi: 625, dec: 0},
	{name: "Timber joist moisture content", section: secStructural, unit: "%", kind: atMost, limit: 20, tol: 1, lo: 11, hi: 22, dec: 1},

	// Foundations
	{name: "Footing depth below ground", section: secFoundations, unit: "mm", kind: atLeast, limit: 750, tol: 20, lo: 700, hi: 1050, dec: 0},
	{name: "Strip footing width", section: secFoundations, unit: "mm", kind: atLeast, limit: 600, tol: 10, lo: 575, hi: 760, dec: 0},
	{name: "Ground slab thickness", section: secFoundations, unit: "mm", kind: atLeast, limit: 150, tol: 3, lo: 141, hi: 185, dec: 0},
	{name: "Rebar cover, cast against ground", section: secFoundations, unit: "mm", kind: atLeast, limit: 75, tol: 3, lo: 70, hi: 100, dec: 0},
	{name: "Damp-proof membrane lap", section: secFoundations, unit: "mm", kind: atLeast, limit: 150, tol: 5, lo: 135, hi: 230, dec: 0},

	// Fire separation
	{name: "Fire door leaf-to-frame gap", section: secFire, unit: "mm", kind: atMost, limit: 4, tol: 0.2, lo: 1.5, hi: 4.4, dec: 1},
	{name: "Fire door threshold gap", section: secFire, unit: "mm", kind: atMost, limit: 10, tol: 0.5, lo: 3, hi: 11, dec: 1},
	{name: "Compartment wall board thickness", section: secFire, unit: "mm", kind: atLeast, limit: 25, tol: 0.5, lo: 24.2, hi: 31, dec: 1},
	{name: "Penetration seal depth", section: secFire, unit: "mm", kind: atLeast, limit: 50, tol: 2, lo: 44, hi: 75, dec: 0},
	{name: "Fire door self-closing time", section: secFire, unit: "s", kind: atMost, limit: 25, tol: 1, lo: 4, hi: 28, dec: 1},

	// Means of egress
	{name: "Stair riser height", section: secEgress, unit: "mm", kind: atMost, limit: 190, tol: 2, lo: 160, hi: 196, dec: 0},
	{name: "Stair going depth", section: secEgress, unit: "mm", kind: atLeast, limit: 250, tol: 3, lo: 242, hi: 300, dec: 0},
	{name: "Stair handrail height", section: secEgress, unit: "mm", kind: atLeast, limit: 900, tol: 10, lo: 875, hi: 1000, dec: 0},
	{name: "Guarding height at landing", section: secEgress, unit: "mm", kind: atLeast, limit: 1100, tol: 10, lo: 1080, hi: 1200, dec: 0},
	{name: "Exit door clear width", section: secEgress, unit: "mm", kind: atLeast, limit: 850, tol: 5, lo: 830, hi: 960, dec: 0},
	{name: "Travel distance to final exit", section: secEgress, unit: "m", kind: atMost, limit: 45, tol: 1, lo: 14, hi: 48, dec: 1},
	{name: "Escape route illuminance", section: secEgress, unit: "lx", kind: atLeast, limit: 1, tol: 0.1, lo: 0.7, hi: 4.5, dec: 1},

	// Electrical service
	{name: "Final circuit breaker rating", section: secElectrical, unit: "A", kind: atMost, limit: 32, steps: []float64{16, 16, 20, 20, 25, 32, 32, 32, 32, 40}},
	{name: "Earth electrode resistance", section: secElectrical, unit: "ohm", kind: atMost, limit: 200, tol: 5, lo: 15, hi: 225, dec: 0},
	{name: "Earth loop impedance Zs (B32)", section: secElectrical, unit: "ohm", kind: atMost, limit: 1.37, tol: 0.05, lo: 0.25, hi: 1.5, dec: 2},
	{name: "RCD trip time at rated current", section: secElectrical, unit: "ms", kind: atMost, limit: 300, tol: 10, lo: 12, hi: 320, dec: 0},
	{name: "Insulation resistance at 500 V", section: secElectrical, unit: "Mohm", kind: atLeast, limit: 1, tol: 0.1, lo: 0.8, hi: 30, dec: 1},
	{name: "Main bonding conductor size", section: secElectrical, unit: "mm²", kind: atLeast, limit: 10, steps: []float64{6, 10, 10, 10, 10, 16, 16, 16, 16, 16, 25, 25}},

	// Plumbing and drainage
	{name: "Trap seal depth", section: secPlumbing, unit: "mm", kind: atLeast, limit: 50, tol: 2, lo: 44, hi: 80, dec: 0},
	{name: "Foul drain fall", section: secPlumbing, kind: atMost, limit: 80, tol: 3, lo: 35, hi: 88, dec: 0, ratio: true},
	{name: "Stack vent diameter", section: secPlumbing, unit: "mm", kind: atLeast, limit: 75, steps: []float64{50, 75, 75, 75, 82, 82, 100, 100, 100, 110, 110, 110}},
	{name: "Hot water storage temperature", section: secPlumbing, unit: "°C", kind: atLeast, limit: 60, tol: 0.5, lo: 58.5, hi: 68, dec: 1},
	{name: "Static supply pressure", section: secPlumbing, unit: "bar", kind: atMost, limit: 5, tol: 0.2, lo: 1.8, hi: 5.6, dec: 1},

	// Mechanical ventilation
	{name: "Whole-dwelling air change rate", section: secVentilation, unit: "ACH", kind: atLeast, limit: 0.5, tol: 0.05, lo: 0.4, hi: 1.2, dec: 2},
	{name: "Kitchen extract rate (hood)", section: secVentilation, unit: "L/s", kind: atLeast, limit: 30, tol: 1, lo: 26, hi: 60, dec: 0},
	{name: "Bathroom extract rate", section: secVentilation, unit: "L/s", kind: atLeast, limit: 15, tol: 1, lo: 12, hi: 30, dec: 0},
	{name: "Duct insulation thickness", section: secVentilation, unit: "mm", kind: atLeast, limit: 25, tol: 1, lo: 21, hi: 50, dec: 0},
	{name: "Fan noise in habitable room", section: secVentilation, unit: "dB(A)", kind: atMost, limit: 30, tol: 1, lo: 19, hi: 32, dec: 0},

	// Accessibility
	{name: "Ramp gradient", section: secAccessibility, kind: atLeast, limit: 12, tol: 0.5, lo: 10.8, hi: 20, dec: 1, ratio: true},
	{name: "Entrance threshold upstand", section: secAccessibility, unit: "mm", kind: atMost, limit: 15, tol: 1, lo: 2, hi: 17, dec: 0},
	{name: "Door clear opening width", section: secAccessibility, unit: "mm", kind: atLeast, limit: 800, tol: 5, lo: 775, hi: 920, dec: 0},
	{name: "Door opening force", section: secAccessibility, unit: "N", kind: atMost, limit: 30, tol: 1, lo: 14, hi: 33, dec: 0},
	{name: "Ramp handrail height", section: secAccessibility, unit: "mm", kind: atLeast, limit: 900, tol: 10, lo: 880, hi: 1000, dec: 0},
	{name: "Accessible WC turning circle", section: secAccessibility, unit: "mm", kind: atLeast, limit: 1500, tol: 10, lo: 1470, hi: 1700, dec: 0},
	{name: "Switch and socket height", section: secAccessibility, unit: "mm", kind: atLeast, limit: 450, tol: 10, lo: 430, hi: 560, dec: 0},

	// Energy envelope
	{name: "Window U-value", section: secEnergy, unit: "W/m²K", kind: atMost, limit: 1.4, tol: 0.05, lo: 0.8, hi: 1.5, dec: 2},
	{name: "External wall U-value", section: secEnergy, unit: "W/m²K", kind: atMost, limit: 0.26, tol: 0.005, lo: 0.13, hi: 0.28, dec: 3},
	{name: "Roof U-value", section: secEnergy, unit: "W/m²K", kind: atMost, limit: 0.16, tol: 0.005, lo: 0.1, hi: 0.172, dec: 3},
	{name: "Wall insulation thickness", section: secEnergy, unit: "mm", kind: atLeast, limit: 100, tol: 3, lo: 92, hi: 160, dec: 0},
	{name: "Loft insulation thickness", section: secEnergy, unit: "mm", kind: atLeast, limit: 270, tol: 5, lo: 255, hi: 330, dec: 0},
	{name: "Air permeability at 50 Pa", section: secEnergy, unit: "m³/(h·m²)", kind: atMost, limit: 8, tol: 0.2, lo: 2, hi: 9, dec: 1},

	// Site works
	{name: "Dropped kerb upstand", section: secSite, unit: "mm", kind: atMost, limit: 6, tol: 0.5, lo: 0, hi: 7, dec: 1},
	{name: "Footpath cross-fall", section: secSite, kind: atLeast, limit: 40, tol: 2, lo: 34, hi: 80, dec: 0, ratio: true},
	{name: "Accessible parking bay width", section: secSite, unit: "mm", kind: atLeast, limit: 3600, tol: 20, lo: 3540, hi: 3900, dec: 0},
	{name: "Boundary fence height", section: secSite, unit: "mm", kind: atMost, limit: 2000, tol: 20, lo: 1650, hi: 2080, dec: 0},
	{name: "Soakaway distance from building", section: secSite, unit: "m", kind: atLeast, limit: 5, tol: 0.1, lo: 4.4, hi: 9, dec: 1},
	{name: "Surface water gully spacing", section: secSite, unit: "m", kind: atMost, limit: 30, tol: 1, lo: 12, hi: 33, dec: 1},
}

// sectionChecks lists, per section, the indexes into checks of its checks.
var sectionChecks = func() (out [numSections][]int) {
	for i, c := range checks {
		out[c.section] = append(out[c.section], i)
	}
	return out
}()
