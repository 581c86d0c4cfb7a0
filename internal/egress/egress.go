// Package egress is the rule for the HTTP requests jobgate sends to
// addresses its users chose (webhooks, endpoint types): only public
// unicast addresses, unless the operator allows more, checked on every
// connection (so DNS rebinding and redirects are covered too).
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// ErrForbiddenAddress: a URL resolved to an address that is not public
// (loopback, private, link-local, ...) and the operator did not allow it.
var ErrForbiddenAddress = errors.New("address is not public")

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

// PublicAddr reports whether ip is a public unicast address a request may
// be sent to by default.
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

// Policy says which addresses beyond the public ones may be dialed.
type Policy struct {
	// AllowAll permits every address (the notifier's AllowPrivate).
	AllowAll bool
	// Allow are the ranges permitted besides the public addresses
	// (JOBGATE_ENDPOINT_ALLOW; `serve --dev` adds loopback).
	Allow []netip.Prefix
}

// Loopback are the loopback ranges, which `serve --dev` allows.
var Loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// ParseAllow reads a comma- or space-separated list of CIDRs (a bare
// address counts as its own /32 or /128).
func ParseAllow(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		p, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil {
				return nil, fmt.Errorf("%q is not a CIDR such as 10.0.0.0/8: %w", f, err)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// Permits reports whether ip may be dialed.
func (p Policy) Permits(ip netip.Addr) bool {
	ip = ip.Unmap()
	if p.AllowAll || PublicAddr(ip) {
		return true
	}
	for _, a := range p.Allow {
		if a.Contains(ip) {
			return true
		}
	}
	return false
}

// CheckURL refuses early what the dialer would refuse anyway: a URL that
// is not http(s) with a host, carries user info, or names a host (an
// address, or localhost) the policy does not permit. shown is the URL as
// an error may quote it (scheme and host: its path or query may hold a
// token).
func (p Policy) CheckURL(raw string) (u *url.URL, shown string, err error) {
	u, err = url.Parse(raw)
	if err != nil {
		return nil, "", errors.New("not a URL")
	}
	shown = u.Scheme + "://" + u.Host
	if u.Scheme != "https" && u.Scheme != "http" {
		return nil, shown, fmt.Errorf("url %s: scheme must be https (or http)", shown)
	}
	if u.Hostname() == "" || u.User != nil {
		return nil, shown, fmt.Errorf("url %s: needs a host and no user info", shown)
	}
	host := strings.ToLower(u.Hostname())
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		if !p.Permits(netip.MustParseAddr("127.0.0.1")) {
			return nil, shown, fmt.Errorf("url %s: %w", shown, ErrForbiddenAddress)
		}
	} else if ip, err := netip.ParseAddr(host); err == nil && !p.Permits(ip) {
		return nil, shown, fmt.Errorf("url %s: %w", shown, ErrForbiddenAddress)
	}
	return u, shown, nil
}

// Dialer dials only addresses the policy permits. The check runs in
// Control, on the address about to be connected, so it covers every
// address a name resolves to, a name that changes its answer later (DNS
// rebinding) and any proxy or redirect target alike.
func Dialer(p Policy, timeout time.Duration) *net.Dialer {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if p.AllowAll {
		return d
	}
	d.ControlContext = func(_ context.Context, network, address string, _ syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return fmt.Errorf("%w: %s", ErrForbiddenAddress, address)
		}
		ip, err := netip.ParseAddr(host)
		if err != nil || !p.Permits(ip) {
			return fmt.Errorf("%w: %s %s", ErrForbiddenAddress, network, address)
		}
		return nil
	}
	return d
}
