#!/usr/bin/env bash
# Creates .venv-sglang/ (gitignored) with sglang's own observability code from PyPI, pinned in
# python/sglang_real/requirements*.txt, for the real-sglang e2e tests (e2e/sglang_real_e2e_test.go, docs/semconv.md
# §7): the sglang wheel with --no-deps (its declared dependencies are torch, CUDA and GPU kernels), then only what
# its observability modules import. No torch, no GPU, no model weights. Idempotent: a venv whose stamp matches the
# requirement files is left alone.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REQ="$ROOT/python/sglang_real"
VENV="${SGLANG_VENV:-$ROOT/.venv-sglang}"
PY="${PYTHON:-python3}"
STAMP="$VENV/.installed"
want="$(cat "$REQ/requirements.txt" "$REQ/requirements-deps.txt" | sha256sum | cut -d' ' -f1)"

if [[ -x "$VENV/bin/python" && -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
	echo "$VENV: $(grep '^sglang==' "$REQ/requirements.txt") already installed"
	exit 0
fi
"$PY" -m venv "$VENV"
echo "*" >"$VENV/.gitignore" # keep the venv out of git without touching the shared .gitignore
pip=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile)
"${pip[@]}" --no-deps -r "$REQ/requirements.txt"
"${pip[@]}" -r "$REQ/requirements-deps.txt"
"$VENV/bin/python" "$REQ/sglang_driver.py" --families-only >/dev/null # the shimmed imports work
echo "$want" >"$STAMP"
"$VENV/bin/python" -c 'import importlib.metadata as m; print("sglang", m.version("sglang"))'
