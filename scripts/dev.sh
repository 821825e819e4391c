#!/usr/bin/env bash
# pmewald developer / user entry point.
#
#   scripts/dev.sh setup   install what is missing (Debian packages, .venv, pmewald)
#   scripts/dev.sh demo    setup, then run the main job on 2 MPI ranks
#   scripts/dev.sh test    setup, then run the whole test suite (serial and MPI)
#
# Idempotent: with nothing changed, setup only checks stamps and returns in seconds.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv"
PY="$VENV/bin/python"

log() { printf '[pmewald setup] %s\n' "$*" >&2; }

# Open MPI refuses to run as root and to oversubscribe unless told. Its
# single-copy shared-memory path (CMA) is 3x faster for large remaps and works
# here; in containers without ptrace permission set
# OMPI_MCA_btl_vader_single_copy_mechanism=none yourself.
mpi_env() {
  if [ "$(id -u)" = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  fi
  export OMPI_MCA_rmaps_base_oversubscribe=1
}

ensure_system_packages() {
  local pkgs=(g++ make cmake pkg-config libopenmpi-dev openmpi-bin libfftw3-dev libtrilinos-kokkos-dev
              libsimgrid-dev)
  local base_py="${PMEWALD_PYTHON:-python3}"
  if ! command -v "$base_py" >/dev/null 2>&1; then
    pkgs+=(python3 python3-venv python3-dev)
  elif ! "$base_py" -c 'import venv, ensurepip, sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' >/dev/null 2>&1; then
    pkgs+=(python3-venv python3-dev)
  fi
  local missing=()
  for p in "${pkgs[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing Debian packages: ${missing[*]}"
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

hash_of() { # hash of the named files' paths and contents
  find "$@" -type f -not -path '*/__pycache__/*' -not -name '*.so' 2>/dev/null | LC_ALL=C sort | xargs sha1sum | sha1sum | cut -c1-40
}

ensure_venv() {
  local base_py="${PMEWALD_PYTHON:-python3}"
  if [ ! -x "$PY" ]; then
    log "creating $VENV"
    "$base_py" -m venv "$VENV"
  fi
  local want have
  want="$(hash_of scripts/requirements-dev.txt scripts/requirements-extra.txt)-$(mpicc --showme:version 2>&1 | head -1 | sha1sum | cut -c1-8)"
  have="$(cat "$VENV/.pmewald-requirements" 2>/dev/null || true)"
  if [ "$want" != "$have" ]; then
    log "installing Python packages into .venv"
    "$PY" -m pip install -q --upgrade pip
    "$PY" -m pip install -q -r scripts/requirements-dev.txt
    [ -f scripts/requirements-extra.txt ] && "$PY" -m pip install -q -r scripts/requirements-extra.txt
    # mpi4py must use the same MPI library as the extension: build it from
    # source against the system's mpicc rather than take a binary wheel.
    MPICC="$(command -v mpicc)" "$PY" -m pip install -q --no-binary mpi4py --no-cache-dir "mpi4py>=3.1"
    echo "$want" >"$VENV/.pmewald-requirements"
  fi
}

ensure_package() {
  local want have
  want="$(hash_of CMakeLists.txt pyproject.toml cmake cpp)"
  have="$(cat "$VENV/.pmewald-build" 2>/dev/null || true)"
  if [ "$want" != "$have" ] || ! "$PY" -c 'import pmewald._core' >/dev/null 2>&1; then
    log "building pmewald into .venv (editable)"
    "$PY" -m pip install -q --no-build-isolation --no-deps -e . \
      -Ccmake.define.CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" -Cbuild.verbose=false
    echo "$want" >"$VENV/.pmewald-build"
  fi
}

setup() {
  ensure_system_packages
  mpi_env
  ensure_venv
  ensure_package
}

cmd="${1:-demo}"
shift || true
case "$cmd" in
  setup)
    setup
    ;;
  demo)
    setup
    exec mpirun -n 2 "$PY" -m pmewald "$@"
    ;;
  test)
    setup
    export CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)"
    exec "$PY" -m pytest "$@"
    ;;
  *)
    echo "usage: scripts/dev.sh {setup|demo|test} [args...]" >&2
    exit 2
    ;;
esac
