#!/usr/bin/env bash
# SimGrid 4.1 for the simulated-scale studies (docs/scaling.md, "Which SimGrid"): Debian's
# 3.32 (libsimgrid-dev, what the suite uses) spends most of a large simulation in per-message
# bookkeeping that later releases removed; 4.1 runs the 256-rank water98k study ~4x faster.
# Builds it from PyPI's source distribution (simgrid==4.1: the whole C++ source) into
# build/simgrid-4.1/ (SMPI on; model checking, Python, Java, Fortran off) and installs it to
# build/simgrid-4.1/install; about 20 minutes on 2 cores (18 min here), once (idempotent). Prints the prefix:
#   export PMEWALD_SIMGRID=$(bash scripts/simgrid-setup.sh)
# then the scale scripts build their driver with its smpicxx (build-smpi-simgrid4.1.0/)
# and run its smpirun. Not needed by the tests.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION=4.1
BASE="$ROOT/build/simgrid-$VERSION"
PREFIX="$BASE/install"
log() { printf '[pmewald simgrid-setup] %s\n' "$*" >&2; }
if [ -x "$PREFIX/bin/smpirun" ] && [ -f "$PREFIX/lib/simgrid/smpimain" ]; then
  echo "$PREFIX"
  exit 0
fi
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
for pkg in cmake g++ libboost-dev python3-venv; do
  dpkg -s "$pkg" >/dev/null 2>&1 || {
    log "installing Debian package $pkg"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null
  }
done
mkdir -p "$BASE"
cd "$BASE"
if [ ! -d "simgrid-$VERSION" ]; then
  PIP="$ROOT/.venv/bin/pip"
  [ -x "$PIP" ] || { python3 -m venv "$BASE/venv"; PIP="$BASE/venv/bin/pip"; }
  log "downloading simgrid==$VERSION (source) from PyPI"
  "$PIP" download -q --no-deps --no-binary :all: "simgrid==$VERSION" -d "$BASE" >&2
  tar xzf "simgrid-$VERSION.tar.gz"
fi
log "configuring and building (about 20 minutes on 2 cores; log: $BASE/build/make.log)"
cmake -S "simgrid-$VERSION" -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$PREFIX" \
  -Denable_model-checking=OFF -Denable_python=OFF -Denable_fortran=OFF -Denable_lto=OFF -Denable_java=OFF \
  -Denable_sthread=OFF -Denable_documentation=OFF -Denable_debug=OFF -Denable_compile_optimizations=ON \
  > "$BASE/cmake.log" 2>&1
nice cmake --build build -j "$(nproc)" > "$BASE/build/make.log" 2>&1
cmake --install build > "$BASE/install.log" 2>&1
[ -x "$PREFIX/bin/smpirun" ] || { log "no $PREFIX/bin/smpirun after the build"; exit 1; }
log "ok: $PREFIX"
echo "$PREFIX"
