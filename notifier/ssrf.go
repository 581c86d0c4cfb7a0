package notifier

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// ErrForbiddenAddress: a webhook URL resolved to an address that is not
// public (loopback, private, link-local, ...) and private webhooks are not
// allowed.
var ErrForbiddenAddress = errors.New("webhook address is not public")

// nonPublic are special-purpose ranges netip has no predicate for.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, broadcast
	netip.MustParsePrefix("100::/64"),        // discard
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("fec0::/10"),       // deprecated site-local
}

// Prefixes that embed an IPv4 address, which must be public itself.
var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// PublicAddr reports whether ip is a public unicast address a webhook may be
// delivered to by default.
func PublicAddr(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() ||
		ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(ip) {
			return false
		}
	}
	b := ip.As16()
	switch {
	case nat64.Contains(ip):
		return PublicAddr(netip.AddrFrom4([4]byte(b[12:16])))
	case sixToFour.Contains(ip):
		return PublicAddr(netip.AddrFrom4([4]byte(b[2:6])))
	}
	return true
}

// guardedDialer dials webhook endpoints. Unless allowPrivate, it refuses any
// connection whose resolved address is not public. The check runs in Control,
// on the address about to be connected, so it covers every address a name
// resolves to, a name that changes its answer later (DNS rebinding) and any
// proxy or redirect target alike.
func guardedDialer(allowPrivate bool, timeout time.Duration) *net.Dialer {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if allowPrivate {
		return d
	}
	d.ControlContext = func(_ context.Context, network, address string, _ syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return fmt.Errorf("%w: %s", ErrForbiddenAddress, address)
		}
		ip, err := netip.ParseAddr(host)
		if err != nil || !PublicAddr(ip) {
			return fmt.Errorf("%w: %s %s", ErrForbiddenAddress, network, address)
		}
		return nil
	}
	return d
}
