package notifier

import (
	"testing"

	"github.com/jobgate/jobgate/internal/config"
	"github.com/stretchr/testify/require"
)

// A notifier built without settings retries and mails as serve does by
// default: internal/config names those defaults once.
func TestDefaultsAreServes(t *testing.T) {
	t.Parallel()
	serve := config.Default().Notifier
	got := Config{}.withDefaults()
	require.Equal(t, serve.WebhookRetries, got.Retries)
	require.Equal(t, serve.Mail.SMTPPort, got.Mail.Port)
	require.Equal(t, serve.Mail.From, got.Mail.From)
}
