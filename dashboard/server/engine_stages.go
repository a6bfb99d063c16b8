package server

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/otelcol-miles/otelcol-miles/dashboard/advisory"
	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// Engine stages: generate time split by sglang's request-trace stages (docs/semconv.md §10), per step and per
// engine (the Lifecycle view), and one sample's lifecycle with its engine slices (the sample page's strip).

// stepEngineStages is one consumed step's engine-stage split.
type stepEngineStages struct {
	Step     int                       `json:"step"`
	Total    store.EngineStageTotals   `json:"total"`
	ByEngine []store.EngineStageTotals `json:"by_engine"`
}

type engineStagesResp struct {
	Stages []string           `json:"stages"`
	Steps  []stepEngineStages `json:"steps"`
}

// EngineStageSteps is how many of the newest consumed steps /lifecycle/engine_stages answers by default.
const EngineStageSteps = 16

func (s *Server) engineStages(r *http.Request) (any, error) {
	n, err := intParam(r, "steps", EngineStageSteps, 1, 256)
	if err != nil {
		return nil, err
	}
	return engineStagesOf(s.traj, n), nil
}

// stepAnatomies is what the engine-stage split reads: the consumed steps and their anatomies.
type stepAnatomies interface {
	LifecycleSteps() []store.StepSummary
	Anatomy(step int, sortKey string, offset, limit int) (*store.AnatomyResult, error)
}

func engineStagesOf(st stepAnatomies, n int) engineStagesResp {
	out := engineStagesResp{Stages: store.EngineStageNames, Steps: []stepEngineStages{}}
	steps := st.LifecycleSteps()
	for _, sm := range steps[max(0, len(steps)-n):] {
		a, err := st.Anatomy(sm.Step, "submit", 0, 1)
		if err != nil {
			continue
		}
		out.Steps = append(out.Steps, stepEngineStages{Step: sm.Step, Total: a.EngineTotal, ByEngine: a.EngineByEngine})
	}
	return out
}

// engineQueueInput is the advisory's T5 input: the newest steps' split (nil when no segment is traced).
func engineQueueInput(st stepAnatomies) *advisory.EngineQueue {
	es := engineStagesOf(st, 8)
	q := &advisory.EngineQueue{ByEngine: map[string][2]float64{}}
	for _, s := range es.Steps {
		q.Steps = append(q.Steps, s.Step)
		q.Segments += s.Total.Traced
		q.GenS += s.Total.Gen
		q.QueueS += s.Total.Stages[0]
		for _, e := range s.ByEngine {
			v := q.ByEngine[e.Engine]
			q.ByEngine[e.Engine] = [2]float64{v[0] + e.Gen, v[1] + e.Stages[0]}
		}
	}
	if q.Segments == 0 {
		return nil
	}
	return q
}

type sampleLifecycleResp struct {
	Step int `json:"step"`
	// Consume is the step's consume time, null when no step_consume names the step.
	Consume          *float64           `json:"consume"`
	Pushes           []store.WeightPush `json:"weight_pushes"`
	EngineStages     []string           `json:"engine_stages"`
	EngineSliceNames []string           `json:"engine_slice_names"`
	// Row is the sample's anatomy row, null when the step did not consume it (or was not consumed).
	Row *store.AnatomyRow `json:"row"`
}

// sampleLifecycle is the anatomy row of one consumed sample. A sample the trajectories do not show consumed
// (a dump of a step whose spans are absent, an eval sample) is an answer with row null, not a 404: the sample
// page asks for every sample it opens (docs/dashboard-api.md).
func (s *Server) sampleLifecycle(r *http.Request) (any, error) {
	id, err := strconv.Atoi(r.PathValue("id"))
	if err != nil || id < 0 {
		return nil, badData(errors.New("step id must be a non-negative integer"))
	}
	idx, err := strconv.Atoi(r.PathValue("idx"))
	if err != nil || idx < 0 {
		return nil, badData(errors.New("sample index must be a non-negative integer"))
	}
	none := sampleLifecycleResp{Step: id, Pushes: []store.WeightPush{}, EngineStages: store.EngineStageNames, EngineSliceNames: []string{}}
	a, err := s.traj.Anatomy(id, "submit", 0, 0)
	switch {
	case errors.Is(err, store.ErrNoStep):
		return none, nil
	case err != nil:
		return nil, badData(err)
	}
	for i := range a.Rows {
		if a.Rows[i].Sample == idx {
			return sampleLifecycleResp{
				Step: id, Consume: &a.Consume, Pushes: a.Pushes, EngineStages: a.EngineStages,
				EngineSliceNames: a.EngineSliceNames, Row: &a.Rows[i],
			}, nil
		}
	}
	none.Consume = &a.Consume
	return none, nil
}
