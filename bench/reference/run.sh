#!/usr/bin/env bash
# bench/reference/run.sh — our dashboard and the Python miles dashboard (radixark/miles) side by side on the same
# generated run: the all-lane carpet (cold open + first carpet, warm) and the fleet overview (warm).
#
#   bench/reference/run.sh                    # 7 alternating rounds (reference, ours, ours, reference, …)
#   REF_ROUNDS=3 bench/reference/run.sh
#   MILES_REF_REPO=/path/to/miles bench/reference/run.sh   # a checkout (or a bare git dir) instead of cloning
#   MILES_REF_SCRATCH=/tmp/x bench/reference/run.sh       # where the clone, the venv and the runs go
#
# Everything the reference needs is fetched into the scratch dir, never into this repository: its repository
# (git clone of https://github.com/radixark/miles, or MILES_REF_REPO) and a throwaway venv with the store's
# dependencies from PyPI (numpy, polars). When either cannot be had the reference is skipped with a message and
# our side still runs. The runs are written by bench/reference/genrun: 512 lanes × 60 steps (about 4 h of 1 s
# readings) in the miles v1 layout (~700 MB) and in ours (compacted, with gpu_rollup). BENCHMARKS.md, "Against
# the reference dashboard", has the figures and what each one times.
set -euo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}
ROUNDS=${REF_ROUNDS:-7}
SCRATCH=${MILES_REF_SCRATCH:-${TMPDIR:-/tmp}/miles-ref}
mkdir -p "$SCRATCH"
OUT=$SCRATCH/results.txt
: >"$OUT"

# --- the reference: its repository and a venv, or a skip -------------------------------------------------------
REF=""
if [ ! -f "$SCRATCH/miles/miles/dashboard/store.py" ]; then
	rm -rf "$SCRATCH/miles"
	if [ -n "${MILES_REF_REPO:-}" ] && [ -d "$MILES_REF_REPO/miles/dashboard" ]; then
		cp -r "$MILES_REF_REPO" "$SCRATCH/miles"
	elif [ -n "${MILES_REF_REPO:-}" ] && git --git-dir="$MILES_REF_REPO" rev-parse HEAD >/dev/null 2>&1; then
		mkdir -p "$SCRATCH/miles" && git --git-dir="$MILES_REF_REPO" archive HEAD miles | tar -x -C "$SCRATCH/miles"
	else
		git clone -q --depth 1 https://github.com/radixark/miles "$SCRATCH/miles" 2>/dev/null || rm -rf "$SCRATCH/miles"
	fi
fi
if [ -f "$SCRATCH/miles/miles/dashboard/store.py" ]; then
	if [ ! -x "$SCRATCH/venv/bin/python" ] || ! "$SCRATCH/venv/bin/python" -c 'import numpy, polars' 2>/dev/null; then
		rm -rf "$SCRATCH/venv"
		if python3 -m venv "$SCRATCH/venv" && "$SCRATCH/venv/bin/pip" install -q numpy polars >"$SCRATCH/pip.log" 2>&1; then :; else
			echo "reference skipped: could not build a venv with numpy and polars from PyPI (see $SCRATCH/pip.log)" >&2
			rm -rf "$SCRATCH/venv"
		fi
	fi
	[ -x "$SCRATCH/venv/bin/python" ] && REF=$SCRATCH/venv/bin/python
else
	echo "reference skipped: radixark/miles could not be fetched (no network to GitHub? set MILES_REF_REPO to a checkout)" >&2
fi

# --- the runs ------------------------------------------------------------------------------------------------
for layout in v1 ours; do
	if [ ! -f "$SCRATCH/run-$layout/dashboard/meta.json" ]; then
		rm -rf "$SCRATCH/run-$layout"
		$GO run ./bench/reference/genrun -layout $layout -out "$SCRATCH/run-$layout"
		# a finished run: written a while ago (the column cache takes a plain hour only once it is left alone)
		find "$SCRATCH/run-$layout" -type f -exec touch -d '1 hour ago' {} +
	fi
done
T1=$($GO run ./bench/reference/genrun -window)
T0=$(echo "$T1" | cut -d' ' -f1)
T1=$(echo "$T1" | cut -d' ' -f2)

# --- alternating rounds ---------------------------------------------------------------------------------------
$GO test -c -o "$SCRATCH/reference.test" ./bench/reference/
ours() {
	(cd bench/reference && MILES_REF_RUN_V1=$SCRATCH/run-v1 MILES_REF_RUN_OURS=$SCRATCH/run-ours \
		"$SCRATCH/reference.test" -test.run '^$' -test.bench 'Views' -test.benchtime 5x -test.count 1) |
		awk '/^BenchmarkViews/ { name=$1; sub(/^BenchmarkViews\//, "", name); sub(/-[0-9]+$/, "", name)
			print "ours " name " " $3/1e6
			for (i = 5; i < NF; i += 2) if ($(i+1) ~ /^ms-/) print "ours " name "/" $(i+1) " " $i }' >>"$OUT"
}
theirs() {
	[ -n "$REF" ] && "$REF" bench/reference/reference_bench.py --repo "$SCRATCH/miles" \
		--run "$SCRATCH/run-v1" --t0 "$T0" --t1 "$T1" 2>/dev/null >>"$OUT" || true
}
for r in $(seq "$ROUNDS"); do
	echo "round $r/$ROUNDS (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
	if [ $((r % 2)) = 1 ]; then theirs; ours; else ours; theirs; fi
done

# --- medians --------------------------------------------------------------------------------------------------
echo "machine: $(nproc) CPUs, load average now $(cut -d' ' -f1-3 /proc/loadavg); $ROUNDS rounds; ms, median [min–max]"
sort "$OUT" | awk '{ k=$1 " " $2; v[k]=v[k] " " $3 } END { for (k in v) print k, v[k] }' | sort | while read -r who name vals; do
	echo "$vals" | tr ' ' '\n' | grep -v '^$' | sort -g | awk -v w="$who" -v n="$name" \
		'{ a[NR]=$1 } END { m = (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2; printf "%-9s %-40s %9.1f [%g–%g] n=%d\n", w, n, m, a[1], a[NR], NR }'
done
