package job

import "github.com/jobgate/jobgate/pkg/api"

// The contract's own types and rules live in the public pkg/api; the
// services know them by these names, beside the record they describe.

type (
	State           = api.State
	Progress        = api.Progress
	Failure         = api.Failure
	Resource        = api.Resource
	ResultLink      = api.ResultLink
	Links           = api.Links
	FieldError      = api.FieldError
	ValidationError = api.ValidationError
	ConflictError   = api.ConflictError
	Problem         = api.Problem
	ProblemKind     = api.ProblemKind
	UserError       = api.UserError
	Attempt         = api.Attempt
)

const (
	StateScheduled = api.StateScheduled
	StateQueued    = api.StateQueued
	StateRunning   = api.StateRunning
	StateSucceeded = api.StateSucceeded
	StateFailed    = api.StateFailed
	StateCanceled  = api.StateCanceled

	CategoryTimeout        = api.CategoryTimeout
	CategoryBudgetExceeded = api.CategoryBudgetExceeded
	CategoryRenderError    = api.CategoryRenderError
	CategoryHandlerError   = api.CategoryHandlerError
	CategoryWorkerLost     = api.CategoryWorkerLost
	CategoryExhausted      = api.CategoryExhausted
	CategoryExpired        = api.CategoryExpired
	CategoryInternal       = api.CategoryInternal
	CategoryCanceled       = api.CategoryCanceled
	CategoryDeadline       = api.CategoryDeadlineExceeded

	OutcomeSucceeded  = api.OutcomeSucceeded
	OutcomeFailed     = api.OutcomeFailed
	OutcomeWorkerLost = api.OutcomeWorkerLost
	OutcomeGivenBack  = api.OutcomeGivenBack
	OutcomeCanceled   = api.OutcomeCanceled

	ProblemTypePrefix = api.ProblemTypePrefix

	MaxTypeNameLen      = api.MaxTypeNameLen
	MaxSchemaBytes      = api.MaxSchemaBytes
	MaxDescriptionBytes = api.MaxDescriptionBytes
	MaxTypeAttempts     = api.MaxTypeAttempts
	MaxTypeTimeout      = api.MaxTypeTimeout
	MaxResultBytesLimit = api.MaxResultBytesLimit
	MaxContentTypeLen   = api.MaxContentTypeLen
	MaxTypes            = api.MaxTypes
)

var (
	ErrNotFound         = api.ErrNotFound
	ErrKeyReused        = api.ErrKeyReused
	ErrKeyMissing       = api.ErrKeyMissing
	ErrKeyInvalid       = api.ErrKeyInvalid
	ErrMalformed        = api.ErrMalformed
	ErrTerminal         = api.ErrTerminal
	ErrResultNotReady   = api.ErrResultNotReady
	ErrJobFailed        = api.ErrJobFailed
	ErrJobCanceled      = api.ErrJobCanceled
	ErrNoResult         = api.ErrNoResult
	ErrPermanentFailure = api.ErrPermanentFailure
	ErrUnauthorized     = api.ErrUnauthorized
	ErrUnavailable      = api.ErrUnavailable
	ErrStorageFull      = api.ErrStorageFull
	ErrPayloadTooLarge  = api.ErrPayloadTooLarge
	ErrRateLimited      = api.ErrRateLimited
	ErrLinkExpired      = api.ErrLinkExpired
	ErrLinkInvalid      = api.ErrLinkInvalid
	ErrUnsupportedMedia = api.ErrUnsupportedMedia
	ErrBadRequest       = api.ErrBadRequest
	ErrResultExpired    = api.ErrResultExpired
	ErrMethodNotAllowed = api.ErrMethodNotAllowed
	ErrForbidden        = api.ErrForbidden
	ErrValidation       = api.ErrValidation
	ErrInvalidType      = api.ErrInvalidType
	ErrNotRetryable     = api.ErrNotRetryable
	ErrNotScheduled     = api.ErrNotScheduled

	InternalProblem = api.InternalProblem
)

// JobPath is the status path of a job.
func JobPath(id string) string { return api.JobPath(id) }

// ValidID reports whether s has the shape of a job id.
func ValidID(s string) bool { return api.ValidID(s) }

// ValidKey checks an Idempotency-Key value.
func ValidKey(key string) bool { return api.ValidKey(key) }

// ValidTypeName reports whether s is a legal job type name.
func ValidTypeName(s string) bool { return api.ValidTypeName(s) }

// CheckContentType checks a declared result content type.
func CheckContentType(s string) error { return api.CheckContentType(s) }

// ProblemFor returns the catalogue entry of err.
func ProblemFor(err error) ProblemKind { return api.ProblemFor(err) }

// ProblemKinds returns a copy of the catalogue.
func ProblemKinds() []ProblemKind { return api.ProblemKinds() }

// Userf returns a *UserError for sentinel with a formatted message.
func Userf(sentinel error, format string, args ...any) error {
	return api.Userf(sentinel, format, args...)
}
