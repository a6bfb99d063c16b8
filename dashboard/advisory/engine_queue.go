package advisory

import (
	"fmt"
	"sort"
)

// T5: engine-side queueing dominates generate time. Requests wait in the engines' queues (prefill_waiting,
// decode_waiting in sglang's request traces) longer than they are prefilled and decoded: the rollout sends more
// concurrent requests than the engines run at once, so adding requests adds only latency.
func (c *ctx) engineQueueing(r *RuleInfo) {
	q := c.in.EngineQueue
	if q == nil || q.Segments == 0 {
		return // no engine request traces: optional (sglang --enable-trace, docs/python.md), so not a skip
	}
	if q.Segments < c.th.EngineQueueMinSegments || q.GenS <= 0 {
		c.skip(r, fmt.Sprintf("only %d generate segments with engine traces (need %d)", q.Segments, c.th.EngineQueueMinSegments))
		return
	}
	frac := q.QueueS / q.GenS
	if frac < c.th.EngineQueueFrac {
		return
	}
	ev := EngineQueueEvidence{Steps: q.Steps, Segments: q.Segments, GenS: q.GenS, QueueS: q.QueueS, Frac: frac}
	engines := make([]string, 0, len(q.ByEngine))
	for e := range q.ByEngine {
		engines = append(engines, e)
	}
	sort.Strings(engines)
	for _, e := range engines {
		v := q.ByEngine[e]
		if v[0] > 0 && v[1]/v[0] > ev.WorstFrac {
			ev.WorstEngine, ev.WorstFrac = e, v[1]/v[0]
		}
	}
	msg := fmt.Sprintf("Engine-side queueing is %s of generate time over the last %d steps (%s of %s waiting in the engines' queues): "+
		"the engines get more concurrent requests than they run at once; raise --sglang-max-running-requests if KV cache allows, "+
		"add engines, or lower the rollout concurrency", pct(frac), len(q.Steps), dur(q.QueueS), dur(q.GenS))
	if ev.WorstEngine != "" && len(engines) > 1 {
		msg += fmt.Sprintf("; worst engine %s (%s)", ev.WorstEngine, pct(ev.WorstFrac))
	}
	c.fire(r, msg+".", ev)
}
