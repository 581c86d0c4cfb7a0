package system_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/config"
	"github.com/jobgate/jobgate/system"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// writeCerts makes a CA, a server certificate for 127.0.0.1 (also a
// client's, for the routes between nodes, which verify each other) and a
// client certificate, as PEM files in dir: ca.crt, server.crt/.key,
// client.crt/.key.
func writeCerts(t *testing.T, dir string) {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		return k
	}
	write := func(name, typ string, der []byte) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
	}
	now := time.Now()
	caKey := newKey()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "jobgate test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	write("ca.crt", "CERTIFICATE", caDER)
	for i, c := range []struct {
		name string
		eku  []x509.ExtKeyUsage
	}{
		{"server", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}},
		{"client", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
	} {
		key := newKey()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: "jobgate " + c.name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
			ExtKeyUsage: c.eku, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		require.NoError(t, err)
		write(c.name+".crt", "CERTIFICATE", der)
		keyDER, err := x509.MarshalECPrivateKey(key)
		require.NoError(t, err)
		write(c.name+".key", "EC PRIVATE KEY", keyDER)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// The TLS example in deploy/nats/tls.conf, as it is (its paths, ports and
// password replaced by the test's): three nodes whose clients and routes
// speak TLS with certificates of one CA, and every jobgate component
// connecting to them over TLS with its client certificate and a password.
// A job is admitted, rendered and succeeds on R3 streams; a client without
// a certificate of the CA is refused.
func TestComponentsRunOnATLSCluster(t *testing.T) {
	t.Parallel()
	tlsDir := t.TempDir()
	writeCerts(t, tlsDir)
	example, err := os.ReadFile(filepath.Join("..", "deploy", "nats", "tls.conf"))
	require.NoError(t, err)
	const password = "s3cret-route-7"

	type node struct{ client, route int }
	nodes := []node{{freePort(t), freePort(t)}, {freePort(t), freePort(t)}, {freePort(t), freePort(t)}}
	var urls []string
	for i, n := range nodes {
		conf := string(example)
		repl := []string{
			"server_name: n1", fmt.Sprintf("server_name: n%d", i+1),
			"listen: 0.0.0.0:4222", fmt.Sprintf("listen: 127.0.0.1:%d", n.client),
			"listen: 0.0.0.0:6222", fmt.Sprintf("listen: 127.0.0.1:%d", n.route),
			"/etc/nats/tls/", tlsDir + "/",
			"/data/jetstream", t.TempDir(),
			"$JOBGATE_NATS_PASSWORD", `"` + password + `"`,
		}
		for j, m := range nodes {
			repl = append(repl, fmt.Sprintf("nats-route://n%d:6222", j+1), fmt.Sprintf("nats-route://127.0.0.1:%d", m.route))
		}
		conf = strings.NewReplacer(repl...).Replace(conf)
		path := filepath.Join(t.TempDir(), "nats.conf")
		require.NoError(t, os.WriteFile(path, []byte(conf), 0o600))
		opts, err := server.ProcessConfigFile(path)
		require.NoError(t, err, "the example must stay a valid nats-server config")
		opts.NoSigs, opts.NoLog = true, true
		s, err := server.NewServer(opts)
		require.NoError(t, err)
		go s.Start()
		t.Cleanup(s.Shutdown)
		require.True(t, s.ReadyForConnections(10*time.Second), "node %d", i+1)
		urls = append(urls, fmt.Sprintf("tls://127.0.0.1:%d", n.client))
	}

	// Without a client certificate the servers refuse the connection.
	_, err = nats.Connect(urls[0], nats.RootCAs(filepath.Join(tlsDir, "ca.crt")), nats.UserInfo("jobgate", password))
	require.Error(t, err, "verify: a client must present a certificate of the CA")

	settings := config.Default()
	settings.DataDir, settings.HTTPAddr, settings.AuthSecret = t.TempDir(), "127.0.0.1:0", "tls-test-secret"
	settings.NATS = config.NATS{URL: strings.Join(urls, ","), Replicas: 3, User: "jobgate", Password: password,
		TLSCA: filepath.Join(tlsDir, "ca.crt"), TLSCert: filepath.Join(tlsDir, "client.crt"), TLSKey: filepath.Join(tlsDir, "client.key")}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sys, err := system.Start(ctx, system.Config{Settings: &settings, LogOutput: io.Discard})
	require.NoError(t, err)
	defer func() { require.NoError(t, sys.Stop(context.Background())) }()

	runOneReport(t, sys, "over-tls", 1, 60*time.Second, "over TLS")
}
