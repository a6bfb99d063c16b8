package server

import (
	"errors"
	"io/fs"
	"net/http"

	"github.com/otelcol-miles/otelcol-miles/dashboard/dumps"
)

// errorType is the closed set of error kinds the API answers with, as the "errorType" of the envelope
// (docs/dashboard-api.md); status maps each to its HTTP status.
type errorType string

const (
	errorBadData      errorType = "bad_data"     // a malformed or out-of-range parameter
	errorNotFound     errorType = "not_found"    // no such endpoint, step, sample or dump file
	errorUnauthorized errorType = "unauthorized" // a token is required and was not given
	errorForbidden    errorType = "forbidden"    // the request names a host the dashboard is not served under
	errorUnavailable  errorType = "unavailable"  // a dump file still being written: retry
	errorRefused      errorType = "refused"      // a dump the reader will not load (outside its allow-list)
	errorCorrupt      errorType = "corrupt"      // a complete dump file that cannot be read
	errorInternal     errorType = "internal"     // anything else
)

// status is the one place error kinds become HTTP statuses.
func (t errorType) status() int {
	switch t {
	case errorBadData:
		return http.StatusBadRequest
	case errorNotFound:
		return http.StatusNotFound
	case errorUnauthorized:
		return http.StatusUnauthorized
	case errorForbidden:
		return http.StatusForbidden
	case errorUnavailable:
		return http.StatusServiceUnavailable
	default: // errorRefused, errorCorrupt, errorInternal
		return http.StatusInternalServerError
	}
}

// apiError is an error of a known kind.
type apiError struct {
	typ errorType
	err error
}

func (e *apiError) Error() string { return e.err.Error() }
func (e *apiError) Unwrap() error { return e.err }

func badData(err error) error  { return &apiError{errorBadData, err} }
func notFound(err error) error { return &apiError{errorNotFound, err} }

// classify gives every error a kind: the API's own keep theirs, the dump reader's are told apart by type, any
// other is internal.
func classify(err error) *apiError {
	var (
		ae *apiError
		nf *dumps.NotFoundError
		ue *dumps.UnavailableError
		fe *dumps.ForbiddenError
		fc *dumps.FileCorruptError
		ce *dumps.CorruptError
		re *dumps.RangeError
	)
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &nf), errors.Is(err, fs.ErrNotExist):
		return &apiError{errorNotFound, err}
	case errors.As(err, &ue):
		return &apiError{errorUnavailable, err}
	case errors.As(err, &fe):
		return &apiError{errorRefused, err}
	case errors.As(err, &fc), errors.As(err, &ce):
		return &apiError{errorCorrupt, err}
	case errors.As(err, &re):
		return &apiError{errorBadData, err}
	}
	return &apiError{errorInternal, err}
}
