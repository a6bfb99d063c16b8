#!/usr/bin/env bash
# Counts the files /api/v1/phases, /fleet and /heatmap walk through on a cold store: TestWalk runs under
# Delve's tracer (pinned in tools/delve) with a tracepoint on every function of our module, and walk.py turns
# the log into stays, returns and rooms (dashboard/store/README.md, "Walking a request"). About two minutes here.
#   scripts/walk.sh            # the three handlers
#   scripts/walk.sh phases     # the handlers named (Server methods)
set -euo pipefail
cd "$(dirname "$0")/.."
handlers=("$@")
[ ${#handlers[@]} -gt 0 ] || handlers=(phases fleet heatmap)
work=$(mktemp -d)
trap '[ -n "${WALK_KEEP:-}" ] || rm -rf "$work"' EXIT
echo "trace in $work" >&2
export CGO_ENABLED=1
# Unoptimized, not inlined: every call is a call the tracer sees.
go test -c -gcflags='all=-N -l' -o "$work/server.test" ./dashboard/server
go tool -modfile=tools/delve/go.mod dlv trace --check-go-version=false --stack 64 -e "$work/server.test" \
	'otelcol-miles/(dashboard|internal)/' -- -test.run '^TestWalk$' >/dev/null 2>"$work/trace"
args=()
for h in "${handlers[@]}"; do args+=("server.(*Server).$h"); done
python3 scripts/walk.py "$work/trace" "${args[@]}"
