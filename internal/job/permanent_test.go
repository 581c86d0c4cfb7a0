package job

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A permanent failure is a failed job whose verdict says another attempt
// cannot help; attempts or time running out is not one.
func TestFailedPermanently(t *testing.T) {
	t.Parallel()
	failed := func(category string, retryable bool) *Record {
		return &Record{State: StateFailed, Error: &Failure{Category: category, Retryable: retryable}}
	}
	require.True(t, failed(CategoryHandlerError, false).FailedPermanently())
	require.True(t, failed(CategoryBudgetExceeded, false).FailedPermanently())
	require.False(t, failed(CategoryHandlerError, true).FailedPermanently(), "its attempts ran out")
	require.False(t, failed(CategoryExhausted, false).FailedPermanently())
	require.False(t, failed(CategoryExpired, false).FailedPermanently())
	require.False(t, (&Record{State: StateCanceled}).FailedPermanently())
	require.False(t, (&Record{State: StateFailed}).FailedPermanently())
}
