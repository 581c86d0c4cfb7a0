package renderer

import (
	"fmt"

	"github.com/jobgate/jobgate/pkg/worker"
)

// permanent is a failure that is not retried.
func permanent(category, format string, args ...any) error {
	return worker.Fail(category, false, "%s", fmt.Sprintf(format, args...))
}
