#!/usr/bin/env bash
# make reliability: the campaign of docs/reliability.md on loopback, bounded in time (~15 min with the
# defaults on 2 cores). Results: one JSON line per test in $RELIABILITY_OUT/results.jsonl.
#   RELIABILITY_TESTS="kill disk outage outage-agent agent-stop fuzz exposure acknowledge"  (default: all)
#   outage-agent: the gateway down OUTAGE s behind a node agent (the agent's backlog); agent-stop: the same, the
#   agent stopped (SIGTERM) and restarted halfway through the outage (its backlog must survive the stop)
#   acknowledge: the gateway's rate cap under an agent backlog, big requests split below the gateway's limit,
#   unfinished headers closed, a disk failing under ack: written then kill -9, an agent stopped with a backlog,
#   the roll-up across kills, a lane flood from many addresses, concurrent dashboard queries (go tests that
#   start the binaries, docs/reliability.md); one JSON line with each test's outcome and time
#   KILLS=20 NODES=16 DURATION=40m SPEED=25  (kill -9 under load)   OUTAGE=60 (collector down, s)
#   DISK_HOLD=15s DISK_MIB=256 (disk full / read-only)                FUZZTIME=10s (per Fuzz* target)
#   soak (not in the default list): SOAK=10m wall at SPEED with the dashboard following, a WebSocket reader and
#   a browser page (scripts/reliability/soak_page.mjs, when dashboard/web has its node_modules);
#   DASH_BUDGET=2GiB (the dashboard's --memory-budget; default its own)
#   FUZZ_PARALLEL=<cores> (workers per Fuzz* target)
set -euo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}
OUT=${RELIABILITY_OUT:-$(mktemp -d -t miles-reliability.XXXXXX)}
mkdir -p "$OUT"
TESTS=${RELIABILITY_TESTS:-kill disk outage outage-agent agent-stop fuzz exposure acknowledge}

# acknowledge runs the named go tests verbosely and prints one JSON line: {"test":"acknowledge","results":{name:
# {"ok":bool,"s":seconds}}}.
acknowledge() {
	local log="$OUT/acknowledge.log"
	MILES_E2E_REQUIRE=1 $GO test -count=1 -v \
		-run 'TestGatewayRateCapBackPressureE2E|TestAgentSplitsBatchesBelowGatewayLimitE2E|TestUnfinishedHeadersClosedE2E|TestAckWrittenRefusesWhileDiskFails|TestRefusedWhileDiskFailsE2E|TestEngineRateRefusesRetryable|TestAgentStoppedWithBacklogE2E|TestRollupWrittenAfterItsReadings|TestRollupResumesAfterKill|TestLaneFloodFromManyClientsFallsIdle|TestAdmissionBoundsConcurrentQueries' \
		./e2e/ ./exporters/jsonlexporter/ ./dashboard/server/ >"$log" 2>&1 || true
	python3 - "$log" <<'PY'
import json, re, sys
res = {}
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r"^--- (PASS|FAIL): (\S+) \(([0-9.]+)s\)", line)
    if m:
        res[m.group(2)] = {"ok": m.group(1) == "PASS", "s": float(m.group(3))}
print(json.dumps({"test": "acknowledge", "results": res}))
PY
}
echo "reliability: $TESTS -> $OUT" >&2
for t in $TESTS; do
	echo "reliability: $t ($(date -u +%T))" >&2
	case $t in
	soak)
		$GO run ./bench/reliability -out "$OUT" -nodes "${NODES:-16}" -speed "${SPEED:-25}" -soak "${SOAK:-10m}" -dash-budget "${DASH_BUDGET:-}" soak ;;
	kill | disk | exposure)
		$GO run ./bench/reliability -out "$OUT" -kills "${KILLS:-20}" -nodes "${NODES:-16}" -duration "${DURATION:-40m}" \
			-speed "${SPEED:-25}" -hold "${DISK_HOLD:-15s}" -disk-mib "${DISK_MIB:-256}" "$t" ;;
	outage) python3 scripts/reliability/outage.py --outage "${OUTAGE:-60}" --out "$OUT/outage" | tee -a "$OUT/results.jsonl" ;;
	outage-agent) python3 scripts/reliability/outage.py --outage "${OUTAGE:-60}" --via-agent --out "$OUT/outage-agent" | tee -a "$OUT/results.jsonl" ;;
	agent-stop) python3 scripts/reliability/outage.py --outage "${OUTAGE:-60}" --via-agent --stop-agent --out "$OUT/agent-stop" | tee -a "$OUT/results.jsonl" ;;
	fuzz) FUZZTIME=${FUZZTIME:-10s} scripts/reliability/fuzz.sh | tee -a "$OUT/results.jsonl" ;;
	acknowledge) acknowledge | tee -a "$OUT/results.jsonl" ;;
	*) echo "unknown test $t" >&2; exit 2 ;;
	esac
done
echo "reliability: done; results in $OUT/results.jsonl" >&2
