package system

import (
	"os"
	"path/filepath"
	"strings"
)

// natsURLFile, in the data dir, holds the client URL of the embedded
// server while it listens for NATS clients (Settings.NATS.Listen). `jobgate
// nats-user`, run with the data dir alone (serve's --nats-listen is a flag
// of another process), prints it rather than no URL at all.
const natsURLFile = "nats-url"

// noteNATSURL writes the listening server's client URL to the data dir,
// and removes one an earlier process left when this one listens for none.
// It is a convenience: a failure to write it is logged, not fatal.
func (s *System) noteNATSURL() {
	path := s.settings.Path(natsURLFile)
	url := ""
	if s.embedded != nil && s.settings.NATS.Listen != "" {
		url = s.embedded.ClientURL()
	}
	if url == "" {
		_ = os.Remove(path)
		return
	}
	if err := os.WriteFile(path, []byte(url+"\n"), 0o600); err != nil {
		s.log.Warn("the NATS listen URL was not written to the data dir (jobgate nats-user will not print it)", "path", path, "err", err)
	}
}

// forgetNATSURL removes the URL when the server stops.
func (s *System) forgetNATSURL() {
	if s.embedded != nil {
		_ = os.Remove(s.settings.Path(natsURLFile))
	}
}

// ServingNATSURL is the client URL of the embedded server of dataDir, as
// the process serving it wrote it ("" when none did: it listens for no
// NATS clients, or none runs). A process that crashed leaves its URL until
// the next one starts on the data dir.
func ServingNATSURL(dataDir string) string {
	b, err := os.ReadFile(filepath.Join(dataDir, natsURLFile))
	if err != nil {
		return ""
	}
	url := strings.TrimSpace(string(b))
	if !strings.HasPrefix(url, "nats://") || strings.ContainsAny(url, " \t\r\n") {
		return ""
	}
	return url
}
