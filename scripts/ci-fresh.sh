#!/usr/bin/env bash
# The fresh-machine rehearsal: clones this repository's committed main (HEAD by default) into a temporary
# directory and runs .ci/run there with every cache empty, as CI and a new user meet it, then prints the wall
# time and the memory peaks. See the README, "Prerequisites".
#
#   scripts/ci-fresh.sh            # one run of HEAD
#   RUNS=3 scripts/ci-fresh.sh     # three runs in a row, each from empty caches; stops at the first failure
#   REF=some-branch KEEP=1 scripts/ci-fresh.sh
#
# Empty: GOCACHE, GOMODCACHE, the npm cache, pip's cache, every venv (they live in the clone; PIP_FIND_LINKS,
# where the machine sets one, is the machine's own wheel folder and stays). Not emptied: what
# the machine has installed system-wide (Go, Node, Python, Debian's chromium once installed by
# scripts/install-chromium.sh); a truly new machine also pays that apt-get install (about a minute).
# Peaks: "largest process" is the biggest single process's RSS (getrusage over every waited child, as GNU time
# reports it); "whole tree" samples the summed RSS of every process of the run once a second.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REF="${REF:-HEAD}"
RUNS="${RUNS:-1}"
BASE="${CI_FRESH_DIR:-$(mktemp -d /tmp/ci-fresh.XXXXXX)}"
commit="$(git -C "$ROOT" rev-parse "$REF")"

# tree_rss SID: the summed RSS (KiB) of every process in session SID.
tree_rss() { ps -e -o sid=,rss= | awk -v s="$1" '$1 == s { t += $2 } END { print t + 0 }'; }

run_once() {
	local n="$1" dir="$BASE/run$1"
	rm -rf "$dir"
	mkdir -p "$dir/cache"
	git clone --quiet --no-local "$ROOT" "$dir/src"
	git -C "$dir/src" checkout --quiet "$commit"
	local log="$dir/ci.log" timing="$dir/time.txt"
	local start end rc peak=0
	start=$(date +%s)
	# A new session, so that its processes (and only they) are summed.
	# The machine's own settings (registries, certificates: ~/.npmrc, pip.conf, go env) stay; only caches move.
	setsid env GOCACHE="$dir/cache/go-build" GOMODCACHE="$dir/cache/gomod" \
		npm_config_cache="$dir/cache/npm" PIP_CACHE_DIR="$dir/cache/pip" PIP_NO_INPUT=1 \
		/usr/bin/time -v -o "$timing" bash -c "cd '$dir/src' && .ci/run" >"$log" 2>&1 &
	local pid=$!
	sleep 1
	local sid
	sid=$(ps -o sid= -p "$pid" | tr -d ' ' || true)
	while kill -0 "$pid" 2>/dev/null; do
		if [ -n "$sid" ]; then
			local r
			r=$(tree_rss "$sid")
			((r > peak)) && peak=$r
		fi
		sleep 1
	done
	rc=0
	wait "$pid" || rc=$?
	end=$(date +%s)
	local maxrss
	maxrss=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$timing" 2>/dev/null || echo 0)
	printf 'ci-fresh run %s of %s: commit %s, rc %s, wall %dm%02ds, largest process %d MiB, whole tree %d MiB, log %s\n' \
		"$n" "$RUNS" "${commit:0:7}" "$rc" $(((end - start) / 60)) $(((end - start) % 60)) \
		$((${maxrss:-0} / 1024)) $((peak / 1024)) "$log" | tee -a "$BASE/summary.txt"
	if [ "$rc" != 0 ]; then
		tail -n 60 "$log"
		grep -n -- '--- FAIL\|^FAIL\|✘\|failed' "$log" | head -40 || true
		return "$rc"
	fi
	if [ -z "${KEEP:-}" ]; then rm -rf "$dir/cache" "$dir/src"; fi
}

for i in $(seq 1 "$RUNS"); do
	run_once "$i"
done
cat "$BASE/summary.txt"
