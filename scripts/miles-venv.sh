#!/usr/bin/env bash
# Creates .venv-miles/ (gitignored): the published miles (miles-rl 0.0.2) and what its rollout code imports, for
# the real-miles e2e tests (e2e/miles_real_e2e_test.go). torch is Debian's python3-torch, seen through
# --system-site-packages of Debian's own python3 (installed here when missing and running as root, as CI does);
# the pinned lists are python/miles_real/requirements*.txt. The miles-otel wheel is built from python/ and
# installed like a user installs it, so its miles_otel.pth turns the instrumentation on under MILES_OTEL=1.
# Idempotent: a venv whose stamp matches the requirement files and python/ is left alone (the wheel is rebuilt
# when python/ changed).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REQ="$ROOT/python/miles_real"
VENV="${MILES_VENV:-$ROOT/.venv-miles}"
PY=/usr/bin/python3
STAMP="$VENV/.installed"

if ! "$PY" -c 'import torch' 2>/dev/null; then
	SUDO=""
	if [[ $(id -u) -ne 0 ]]; then
		command -v sudo >/dev/null || { echo "miles-venv: Debian's python3-torch is missing; run: apt-get install python3-torch" >&2; exit 1; }
		SUDO=sudo
	fi
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-torch python3-venv >/dev/null
fi

want="$(cat "$REQ"/requirements.txt "$REQ"/requirements-deps.txt "$REQ"/constraints.txt | sha256sum | cut -d' ' -f1)"
pkg="$(cd "$ROOT/python" && cat pyproject.toml setup.py miles_otel.pth miles_otel/*.py | sha256sum | cut -d' ' -f1)"
pip=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile)
if [[ ! -x "$VENV/bin/python" || ! -f "$STAMP" || "$(cat "$STAMP")" != "$want" ]]; then
	rm -rf "$VENV"
	"$PY" -m venv --system-site-packages "$VENV"
	echo "*" >"$VENV/.gitignore"
	"${pip[@]}" --no-deps -r "$REQ/requirements.txt"
	"${pip[@]}" -c "$REQ/constraints.txt" -r "$REQ/requirements-deps.txt"
	echo "$want" >"$STAMP"
	rm -f "$VENV/.wheel"
fi
if [[ ! -f "$VENV/.wheel" || "$(cat "$VENV/.wheel")" != "$pkg" ]]; then
	tmp="$(mktemp -d)"
	trap 'rm -rf "$tmp"' EXIT
	cp -r "$ROOT/python/pyproject.toml" "$ROOT/python/setup.py" "$ROOT/python/miles_otel.pth" "$ROOT/python/README.md" "$ROOT/python/miles_otel" "$tmp/"
	"$VENV/bin/python" -m pip wheel --quiet --disable-pip-version-check --no-deps "$tmp" -w "$tmp/dist"
	"${pip[@]}" --no-deps --force-reinstall "$tmp"/dist/miles_otel-*.whl
	echo "$pkg" >"$VENV/.wheel"
fi
"$VENV/bin/python" -c 'import importlib.metadata as m; print("miles-rl", m.version("miles-rl"), "· miles-otel", m.version("miles-otel"))'
