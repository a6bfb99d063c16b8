package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/otelcol-miles/otelcol-miles/dashboard/dumps"
	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// Handler tests on small fakes of the readers: no run directory, no hub.

type fakeMetrics struct {
	metricsReader // not called by these tests
	keys          []store.MetricKey
	series        []store.MetricSeriesResult
	asked         []string
}

func (f *fakeMetrics) MetricKeys() ([]store.MetricKey, []string, uint64) {
	return f.keys, []string{"rollout"}, 42
}

func (f *fakeMetrics) MetricSeries(keys []string, _, _ *float64, _ int) []store.MetricSeriesResult {
	f.asked = keys
	return f.series
}

type fakeDumps struct {
	dumpReader
	listErr, acquireErr error
}

func (f fakeDumps) List() ([]dumps.StepFile, error) { return nil, f.listErr }

func (f fakeDumps) Acquire(dumps.StepKey) (*dumps.Step, func(), error) { return nil, nil, f.acquireErr }

// fakeServer is a Server of the given readers, routed as New routes it.
func fakeServer(s *Server) *Server {
	s.mux = http.NewServeMux()
	s.register(s.mux)
	return s
}

func call(t *testing.T, s *Server, path string) (int, Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	// httptest names example.com, which the dashboard is not served under.
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://localhost"+path, http.NoBody))
	var r Response
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
		t.Fatalf("%s: %v: %s", path, err, rec.Body)
	}
	return rec.Code, r, strings.TrimSpace(rec.Body.String())
}

func TestHandlersOnFakes(t *testing.T) {
	m := &fakeMetrics{}
	s := fakeServer(&Server{metrics: m, dumps: fakeDumps{
		listErr:    &dumps.UnavailableError{Path: "rollout_data", Reason: "listing"},
		acquireErr: &dumps.ForbiddenError{Module: "os", Name: "system"},
	}})
	// An empty catalog is [] (not null) in the typed envelope.
	code, _, body := call(t, s, "/api/v1/metrics/keys")
	if want := `{"status":"success","data":{"categories":["rollout"],"keys":[],"version":"42"}}`; code != 200 || body != want {
		t.Fatalf("%d %s, want %s", code, body, want)
	}
	code, _, body = call(t, s, "/api/v1/metrics/series?keys=a,b&points=3")
	if code != 200 || body != `{"status":"success","data":{"points":3,"series":null}}` || strings.Join(m.asked, ",") != "a,b" {
		t.Fatalf("%d %s (asked %v)", code, body, m.asked)
	}
	// Every error kind answers with its status and the same errorType string.
	for _, tc := range []struct {
		path, typ string
		code      int
	}{
		{"/api/v1/metrics/series", "bad_data", 400},
		{"/api/v1/nope", "not_found", 404},
		{"/api/v1/dumps/steps", "unavailable", 503},
		{"/api/v1/dumps/steps/1", "refused", 500},
		{"/api/v1/dumps/steps/x", "bad_data", 400},
	} {
		code, r, body := call(t, s, tc.path)
		if code != tc.code || r.Status != statusError || string(r.ErrorType) != tc.typ || r.Error == "" || r.Data != nil {
			t.Errorf("%s: %d %s, want %d %s", tc.path, code, body, tc.code, tc.typ)
		}
	}
	// Without a dump reader the dump endpoints say so.
	code, r, _ := call(t, fakeServer(&Server{}), "/api/v1/dumps/steps")
	if code != 404 || !strings.Contains(r.Error, "not configured") {
		t.Fatalf("no dump reader: %d %v", code, r)
	}
	// The token is checked before any handler.
	code, r, _ = call(t, fakeServer(&Server{access: newAccess("t", nil)}), "/api/v1/metrics/keys")
	if code != 401 || r.ErrorType != errorUnauthorized {
		t.Fatalf("no token: %d %v", code, r)
	}
}

func TestErrorKinds(t *testing.T) {
	for typ, code := range map[errorType]int{
		errorBadData: 400, errorNotFound: 404, errorUnauthorized: 401, errorForbidden: 403,
		errorUnavailable: 503, errorRefused: 500, errorCorrupt: 500, errorInternal: 500,
	} {
		if got := typ.status(); got != code {
			t.Errorf("%s: %d, want %d", typ, got, code)
		}
	}
	for _, tc := range []struct {
		err error
		typ errorType
	}{
		{errors.New("x"), errorInternal},
		{badData(errors.New("x")), errorBadData},
		{&dumps.NotFoundError{Msg: "x"}, errorNotFound},
		{&dumps.FileCorruptError{Path: "p", Err: errors.New("x")}, errorCorrupt},
		{&dumps.CorruptError{Msg: "x"}, errorCorrupt},
		{&dumps.RangeError{Msg: "x"}, errorBadData},
	} {
		if got := classify(tc.err).typ; got != tc.typ {
			t.Errorf("%v: %s, want %s", tc.err, got, tc.typ)
		}
	}
}
