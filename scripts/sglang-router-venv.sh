#!/usr/bin/env bash
# Creates .venv-router/ (gitignored) with the real sglang router from PyPI, pinned, for the router-mode e2e test
# (e2e/sglang_e2e_test.go, TestSglangRealRouterE2E) and for trying router mode by hand:
#   scripts/sglang-router-venv.sh && .venv-router/bin/python -m sglang_router.launch_router --help
# The package ships a prebuilt Rust binary (manylinux wheel); nothing else is downloaded. Idempotent: a venv
# that already holds the pinned version is left alone.
set -euo pipefail
VERSION="${SGLANG_ROUTER_VERSION:-0.3.2}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${SGLANG_ROUTER_VENV:-$ROOT/.venv-router}"
PY="${PYTHON:-python3}"

if [[ -x "$VENV/bin/python" ]] &&
	[[ "$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("sglang-router"))' 2>/dev/null)" == "$VERSION" ]]; then
	echo "$VENV: sglang-router $VERSION already installed"
	exit 0
fi
"$PY" -m venv "$VENV"
echo "*" >"$VENV/.gitignore" # keep the venv out of git without touching the shared .gitignore
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "sglang-router==$VERSION"
"$VENV/bin/python" -c 'import importlib.metadata as m; print("sglang-router", m.version("sglang-router"))'
