package server

import (
	"bytes"
	"encoding/binary"
	"encoding/csv"
	"encoding/json"
	"math"
	"net/http"
)

type status string

const (
	statusSuccess status = "success"
	statusError   status = "error"
)

// Response is the envelope of every JSON answer (the Prometheus HTTP API's): data on success, the error's kind
// and message otherwise.
type Response struct {
	Status    status    `json:"status"`
	Data      any       `json:"data,omitempty"`
	ErrorType errorType `json:"errorType,omitempty"`
	Error     string    `json:"error,omitempty"`
}

// apiFunc is one endpoint: it returns the data of its answer or an error. The data is sent in the JSON
// envelope unless it is a body that writes itself (a frame, a CSV table).
type apiFunc func(r *http.Request) (any, error)

// body is an answer that is not JSON.
type body interface {
	write(w http.ResponseWriter)
}

// hidePaths makes f's errors name no server directory (access.redact).
func (s *Server) hidePaths(f apiFunc) apiFunc {
	return func(r *http.Request) (any, error) {
		data, err := f(r)
		if err != nil {
			err = s.access.redactErr(err)
		}
		return data, err
	}
}

func apiHandler(f apiFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		data, err := f(r)
		switch b, ok := data.(body); {
		case err != nil:
			respondError(w, err)
		case ok:
			b.write(w)
		default:
			writeJSON(w, http.StatusOK, Response{Status: statusSuccess, Data: data})
		}
	}
}

func respondError(w http.ResponseWriter, err error) {
	ae := classify(err)
	writeJSON(w, ae.typ.status(), Response{Status: statusError, ErrorType: ae.typ, Error: ae.Error()})
}

// writeJSON is the one JSON writer.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// frame is the binary answer of the carpets (GPU heatmap, lifecycle carpet), one byte per cell:
// [uint32 LE header length][header JSON][rows × buckets uint8] (docs/dashboard-api.md).
type frame struct {
	header any
	cells  []byte
}

func (f frame) write(w http.ResponseWriter) {
	header, _ := json.Marshal(f.header)
	n := len(header)
	if n > math.MaxUint32 { // the frame counts its header in 4 bytes
		http.Error(w, "frame header too long", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "no-store")
	var size [4]byte
	binary.LittleEndian.PutUint32(size[:], uint32(n))
	_, _ = w.Write(size[:])
	_, _ = w.Write(header)
	_, _ = w.Write(f.cells)
}

// csvTable is a CSV download named name.
type csvTable struct {
	name   string
	header []string
	rows   [][]string
}

func (t csvTable) write(w http.ResponseWriter) {
	var buf bytes.Buffer
	cw := csv.NewWriter(&buf)
	_ = cw.Write(t.header)
	_ = cw.WriteAll(t.rows)
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="`+t.name+`"`)
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.Bytes())
}

// nz answers an empty list as [] rather than null.
func nz[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
