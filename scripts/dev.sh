#!/usr/bin/env bash
# pmewald developer / user entry point.
#
#   scripts/dev.sh setup   install what is missing (Debian packages, .venv, pmewald)
#   scripts/dev.sh demo    setup, then run the main job on 2 MPI ranks
#   scripts/dev.sh test    setup, then run the whole test suite (serial and MPI)
#   scripts/dev.sh sanitize  setup, then build the extension with AddressSanitizer,
#                          UndefinedBehaviorSanitizer and LeakSanitizer into
#                          build/sanitize and run the C++-heavy tests on 1 and 2
#                          ranks with it (docs/testing.md, "Sanitizer build")
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

# ---------------------------------------------------------------------------
# Sanitizer build and run (scripts/dev.sh sanitize). Everything lives under
# build/sanitize and leaves .venv alone:
#   cmake/    a plain CMake build of _core with -DPMEWALD_SANITIZE=address;undefined
#   python/   the package: symlinks to python/pmewald/* plus the sanitized _core
#   venv/     an interpreter whose .pth puts python/ before .venv's site-packages
#             (whose editable-install hook it never runs) and imports
#             scripts/sanitize/pmewald_sanitizer_site.py (preloads the ASan
#             runtime into every Python process, checks for leaks at exit)
#   logs/     one file per process that reported anything; any file fails the run
# ---------------------------------------------------------------------------
SAN="$ROOT/build/sanitize"
SAN_PY="$SAN/venv/bin/python"
# -O1: fast enough to run the tests; -g1: line tables for the reports (full
# debug info costs a third more compile time and adds nothing to them).
SAN_FLAGS=(-DPMEWALD_SANITIZE="address;undefined" -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1")
# The C++-heavy tests (FFT, exchange/remap, halo, kernels, real space, PME and
# the SIMD versions) on 1 and 2 ranks, less the numerical sweeps that only
# repeat the same code paths at more parameters (about 10 of the 14 minutes
# the whole files take under the sanitizers).
SAN_TESTS=(tests/test_fft.py tests/test_exchange.py tests/test_kernels.py tests/test_realspace.py
           tests/test_pme.py tests/test_simd.py)
SAN_SELECT="not mpi3 and not mpi4 and not accuracy_sweep and not accuracy_mpi and not test_independence
            and not automatic_choice and not choose_cheapest"

ensure_sanitize_build() {
  mkdir -p "$SAN"
  local want have
  want="$(hash_of CMakeLists.txt cmake cpp scripts/sanitize/keep_loaded.c)-$(echo "${SAN_FLAGS[*]}" | sha1sum | cut -c1-8)"
  have="$(cat "$SAN/.build-stamp" 2>/dev/null || true)"
  if [ "$want" != "$have" ] || ! ls "$SAN"/python/pmewald/_core.*.so >/dev/null 2>&1; then
    log "building the sanitizer build of pmewald._core into build/sanitize"
    local t0=$SECONDS
    cmake -S "$ROOT" -B "$SAN/cmake" "${SAN_FLAGS[@]}" -DPython_EXECUTABLE="$PY" \
      -DPMEWALD_MODULE_DIR="$SAN/python/pmewald" >"$SAN/cmake.log" 2>&1 \
      || { cat "$SAN/cmake.log" >&2; exit 1; }
    cmake --build "$SAN/cmake" -j "$(nproc)" >>"$SAN/cmake.log" 2>&1 || { tail -50 "$SAN/cmake.log" >&2; exit 1; }
    cc -shared -fPIC -O2 -o "$SAN/libkeep_loaded.so" scripts/sanitize/keep_loaded.c
    echo "$want" >"$SAN/.build-stamp"
    log "sanitizer build done in $((SECONDS - t0)) s"
  fi
  # The package next to the sanitized _core: fresh symlinks to the sources.
  find "$SAN/python/pmewald" -maxdepth 1 -type l -delete
  local f
  for f in python/pmewald/*; do
    case "$(basename "$f")" in _core.*|__pycache__) continue ;; esac
    ln -s "$ROOT/$f" "$SAN/python/pmewald/"
  done
  # Its interpreter: the base Python of .venv, with .venv's packages but not
  # its editable pmewald (a meta-path hook that would win over sys.path).
  if [ ! -x "$SAN_PY" ]; then
    "$("$PY" -c 'import sys; print(sys._base_executable)')" -m venv --without-pip "$SAN/venv"
  fi
  local site
  site="$("$SAN_PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  {
    echo "$SAN/python"
    "$PY" -c 'import sysconfig; p = sysconfig.get_paths(); print(p["purelib"]); print(p["platlib"]) if p["platlib"] != p["purelib"] else None'
    echo "$ROOT/scripts/sanitize"
    echo "import pmewald_sanitizer_site"
  } >"$site/pmewald_sanitize.pth"
}

sanitize() {
  ensure_sanitize_build
  local cxx asan stdcxx logs
  cxx="$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$SAN/cmake/CMakeCache.txt")"
  asan="$("$cxx" -print-file-name=libasan.so)"
  stdcxx="$("$cxx" -print-file-name=libstdc++.so)"
  [ -f "$asan" ] || { echo "no AddressSanitizer runtime for $cxx (libasan.so)" >&2; exit 1; }
  logs="$SAN/logs"
  rm -rf "$logs" && mkdir -p "$logs"
  local args=("$@")
  [ ${#args[@]} -gt 0 ] || args=(-q "${SAN_TESTS[@]}" -k "$(echo $SAN_SELECT)")
  log "running the tests under AddressSanitizer + UBSan + LeakSanitizer (reports: build/sanitize/logs)"
  local rc=0 t0=$SECONDS
  # Python is not instrumented: the sanitizer hook of build/sanitize/venv
  # preloads the ASan runtime (libstdc++ with it, so that its __cxa_throw
  # interceptor finds the real one; keep_loaded.so, so that leak reports can
  # name Open MPI's components) into every Python process of the run, the
  # mpirun ranks included, and into nothing else. PYTHONMALLOC=malloc: Python
  # objects in malloc memory, which LeakSanitizer scans for pointers (pymalloc
  # arenas are mmap'd, and what only they point to would look leaked).
  # ASan and LeakSanitizer reports go to build/sanitize/logs; UBSan's (this
  # libubsan ignores log_path) to the process's stderr, which --capture=sys
  # leaves uncaptured, so that a rank's report reaches the test's failure
  # message. Options in the caller's ASAN_/LSAN_/UBSAN_OPTIONS come last and win
  # (e.g. UBSAN_OPTIONS=print_stacktrace=1, ASAN_OPTIONS=fast_unwind_on_malloc=0).
  env PMEWALD_SANITIZE_PRELOAD="$asan $stdcxx $SAN/libkeep_loaded.so" PYTHONMALLOC=malloc \
    ASAN_OPTIONS="detect_leaks=1:leak_check_at_exit=0:halt_on_error=1:log_path=$logs/asan:log_exe_name=1:${ASAN_OPTIONS:-}" \
    LSAN_OPTIONS="suppressions=$ROOT/scripts/sanitize/lsan.supp:print_suppressions=0:${LSAN_OPTIONS:-}" \
    UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=0:${UBSAN_OPTIONS:-}" PYTEST_ADDOPTS="--capture=sys" \
    "$SAN_PY" -m pytest -p no:cacheprovider "${args[@]}" || rc=$?
  if [ -n "$(ls -A "$logs")" ]; then
    local f
    for f in "$logs"/*; do
      printf '\n===== %s =====\n' "$f" >&2
      cat "$f" >&2
    done
    echo "sanitizer reports in build/sanitize/logs ($(ls "$logs" | wc -l) processes)" >&2
    [ "$rc" -ne 0 ] || rc=1
  fi
  [ "$rc" -eq 0 ] && log "sanitizer run clean ($((SECONDS - t0)) s)"
  return "$rc"
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
  sanitize)
    setup
    sanitize "$@"
    ;;
  *)
    echo "usage: scripts/dev.sh {setup|demo|test|sanitize} [args...]" >&2
    exit 2
    ;;
esac
