#!/usr/bin/env bash
# make dist: what a user installs without a Go toolchain (README "Run it on a real job").
#   dist/miles_otel-<v>-py3-none-any.whl                 the emitter and the one switch (MILES_OTEL=1)
#   dist/otelcol-miles_<v>_linux_<arch>.tar.gz            the collector, with configs/
#   dist/miles-dashboard_<v>_linux_<arch>.tar.gz          the dashboard (the SPA is embedded)
#   dist/SHA256SUMS
# for linux amd64 and arm64. The collector's NVML receiver needs cgo, so arm64 is built with Debian's
# aarch64-linux-gnu-gcc (installed here when missing and running as root). Knobs: DIST_DIR (default dist),
# DIST_ARCHES (default "amd64 arm64"), DIST_COLLECTOR_BIN (pack this already built collector for the host's arch
# instead of building it: the dist test packs bin/otelcol-miles).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT="$(mkdir -p "${DIST_DIR:-dist}" && cd "${DIST_DIR:-dist}" && pwd)"
ARCHES="${DIST_ARCHES:-amd64 arm64}"
GO="${GO:-go}"
HOST_ARCH="$($GO env GOARCH)"
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' python/pyproject.toml)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The wheel, built from a copy so python/ gets no build/ or *.egg-info.
mkdir -p "$work/py"
cp -r python/pyproject.toml python/setup.py python/miles_otel.pth python/README.md python/miles_otel "$work/py/"
rm -f "$OUT"/miles_otel-*.whl
python3 -m pip wheel --quiet --disable-pip-version-check --no-deps "$work/py" -w "$OUT"

for arch in $ARCHES; do
	stage="$work/$arch"
	mkdir -p "$stage/otelcol-miles/configs" "$stage/miles-dashboard"
	if [[ "$arch" == "$HOST_ARCH" && -n "${DIST_COLLECTOR_BIN:-}" ]]; then
		cp "$DIST_COLLECTOR_BIN" "$stage/otelcol-miles/otelcol-miles"
	else
		cc=""
		if [[ "$arch" != "$HOST_ARCH" ]]; then
			case "$arch" in
			arm64) cc=aarch64-linux-gnu-gcc pkg="gcc-aarch64-linux-gnu libc6-dev-arm64-cross" ;;
			amd64) cc=x86_64-linux-gnu-gcc pkg="gcc-x86-64-linux-gnu libc6-dev-amd64-cross" ;;
			*) echo "dist: no cross compiler known for $arch" >&2; exit 1 ;;
			esac
			if ! command -v "$cc" >/dev/null || ! dpkg -s ${pkg#* } >/dev/null 2>&1; then
				[[ $(id -u) -eq 0 ]] || { echo "dist: $cc missing: apt-get install $pkg" >&2; exit 1; }
				apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $pkg >/dev/null
			fi
		fi
		echo "dist: otelcol-miles linux/$arch (the whole collector distribution: minutes on 2 cores)"
		(cd otelcol-miles && env CGO_ENABLED=1 GOOS=linux GOARCH="$arch" ${cc:+CC=$cc} \
			$GO build -trimpath -ldflags "-s -w" -o "$stage/otelcol-miles/otelcol-miles" .)
	fi
	cp configs/*.yaml "$stage/otelcol-miles/configs/"
	# pure Go: the dashboard needs no cgo (CGO_ENABLED as the Makefile sets it on the host keeps the build cache)
	if [[ "$arch" == "$HOST_ARCH" ]]; then
		$GO build -o "$stage/miles-dashboard/miles-dashboard" ./cmd/miles-dashboard
	else
		CGO_ENABLED=0 GOOS=linux GOARCH="$arch" $GO build -trimpath -ldflags "-s -w" -o "$stage/miles-dashboard/miles-dashboard" ./cmd/miles-dashboard
	fi
	for name in otelcol-miles miles-dashboard; do
		tar -C "$stage" --owner=0 --group=0 --sort=name -czf "$OUT/${name}_${VERSION}_linux_${arch}.tar.gz" "$name"
	done
done
(cd "$OUT" && sha256sum -- *.whl *.tar.gz >SHA256SUMS)
echo "dist: $(cd "$OUT" && ls | tr '\n' ' ')in $OUT"
