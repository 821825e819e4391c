#!/usr/bin/env bash
# pmewald developer / user entry point.
#
#   scripts/dev.sh setup   install what is missing (Debian packages, .venv, pmewald)
#   scripts/dev.sh demo    setup, then run the main job on 2 MPI ranks
#   scripts/dev.sh test    setup, then run the whole test suite (serial and MPI; two phases,
#                          see whole_suite); with arguments, `pytest ARGS` instead
#   scripts/dev.sh sanitize  setup, then build the extension with AddressSanitizer,
#                          UndefinedBehaviorSanitizer and LeakSanitizer into
#                          build/sanitize and run the C++-heavy tests on 1 and 2
#                          ranks with it (docs/testing.md, "Sanitizer build")
#   scripts/dev.sh test-openmp [pytest args]
#                          set up the OpenMP build too (PMEWALD_KOKKOS=openmp), then run
#                          the PME, FFT and real-space tests on it on 1 rank x 2 threads
#                          and 2 ranks x 1 thread, and compare it with the Serial build
#
# Which Kokkos (docs/install.md): PMEWALD_KOKKOS unset or "system" builds against
# Debian's Kokkos 3.4.01 (Serial backend) in .venv/. PMEWALD_KOKKOS=openmp builds
# Kokkos 3.4.01 with OpenMP from the PyPI sdist of pykokkos-base 0.0.7 (once, into
# $PMEWALD_CACHE, default ~/.cache/pmewald) and pmewald against it in .venv-openmp/;
# PMEWALD_KOKKOS=openmp with Kokkos_ROOT=/your/kokkos takes that installation instead.
#
# Idempotent: with nothing changed, setup only checks stamps and returns in seconds.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# The Kokkos variant: its own venv and build tree, so both builds live side by side.
KOKKOS_VARIANT="${PMEWALD_KOKKOS:-system}"
case "$KOKKOS_VARIANT" in
  system) VENV="$ROOT/.venv" ;;
  openmp) VENV="$ROOT/.venv-openmp" ;;
  *) echo "PMEWALD_KOKKOS must be 'system' (Debian's Serial Kokkos) or 'openmp', got '$KOKKOS_VARIANT'" >&2; exit 2 ;;
esac
PY="$VENV/bin/python"
CACHE="${PMEWALD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pmewald}"
KOKKOS_SDIST="pykokkos-base==0.0.7"  # its external/kokkos is Kokkos 3.4.01, Debian's version

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
  # gromacs: `gmx` for tests/bench/test_bench_gromacs.py and the peer benchmark (bench-setup.sh)
  # python3-lammps (LAMMPS's Python module and library; liblammps-dev has the liblammps.so it
  # loads) and lammps-examples (the peptide): tests/interfaces/test_lammps.py, docs/engines.md
  local pkgs=(g++ make cmake pkg-config libopenmpi-dev openmpi-bin libfftw3-dev libtrilinos-kokkos-dev
              libsimgrid-dev gromacs python3-lammps liblammps-dev lammps-examples)
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

module_list() { # hash of the Python package's file names (the editable install maps each one)
  find python -name '*.py' -not -path '*/__pycache__/*' | LC_ALL=C sort | sha1sum | cut -c1-12
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
    log "installing Python packages into $(basename "$VENV")"
    "$PY" -m pip install -q --upgrade pip
    "$PY" -m pip install -q -r scripts/requirements-dev.txt
    [ -f scripts/requirements-extra.txt ] && "$PY" -m pip install -q -r scripts/requirements-extra.txt
    # mpi4py must use the same MPI library as the extension: build it from
    # source against the system's mpicc rather than take a binary wheel. The
    # wheel is kept in $CACHE (keyed by mpicc and Python), so the second venv
    # (another Kokkos variant, another worktree) installs it in seconds.
    local wheels
    wheels="$CACHE/wheels/mpi4py-$(mpicc --showme:version 2>&1 | head -1 | sha1sum | cut -c1-8)-$("$PY" -c 'import sys; print("py%d%d" % sys.version_info[:2])')"
    if ! ls "$wheels"/mpi4py-*.whl >/dev/null 2>&1; then
      MPICC="$(command -v mpicc)" "$PY" -m pip wheel -q --no-deps --no-binary mpi4py --no-cache-dir -w "$wheels.tmp" "mpi4py>=3.1"
      mkdir -p "$wheels" && mv "$wheels.tmp"/mpi4py-*.whl "$wheels"/ && rm -rf "$wheels.tmp"
    fi
    "$PY" -m pip install -q --no-index --find-links "$wheels" mpi4py
    echo "$want" >"$VENV/.pmewald-requirements"
  fi
  # PyTorch only when asked (PMEWALD_EXTRAS=torch): its PyPI wheel needs its CUDA libraries to
  # import at all, 2.8 GB to download and 5.4 GB installed (docs/engines.md, "Autograd").
  if [[ ",${PMEWALD_EXTRAS:-}," == *",torch,"* ]] && ! "$PY" -c 'import torch' >/dev/null 2>&1; then
    log "installing PyTorch into $(basename "$VENV") (PMEWALD_EXTRAS=torch: about 2.8 GB to download)"
    "$PY" -m pip install -q -r scripts/requirements-torch.txt
  fi
}

# Kokkos 3.4.01 with the OpenMP (and Serial) backend, built once from the
# pykokkos-base sdist into $CACHE/kokkos-3.4.01-openmp (a stamp marks a finished
# install); prints the prefix. A user's Kokkos_ROOT is taken as it is.
ensure_kokkos_openmp() {
  if [ -n "${Kokkos_ROOT:-}" ]; then
    [ -d "$Kokkos_ROOT" ] || { log "Kokkos_ROOT=$Kokkos_ROOT does not exist"; exit 1; }
    echo "$Kokkos_ROOT"
    return
  fi
  local prefix="$CACHE/kokkos-3.4.01-openmp"
  if [ ! -f "$prefix/.pmewald-complete" ]; then
    local work="$CACHE/kokkos-src"
    rm -rf "$work" "$prefix"
    mkdir -p "$work"
    log "downloading the Kokkos 3.4.01 source ($KOKKOS_SDIST sdist from PyPI)"
    "$PY" -m pip download -q --no-deps --no-binary pykokkos-base -d "$work" "$KOKKOS_SDIST" >&2
    tar -xzf "$work"/pykokkos-base-0.0.7.tar.gz -C "$work"
    log "building Kokkos 3.4.01 (OpenMP + Serial, shared) into $prefix (a few minutes, once)"
    cmake -S "$work/pykokkos-base-0.0.7/external/kokkos" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_CXX_STANDARD=17 -DBUILD_SHARED_LIBS=ON \
      -DKokkos_ENABLE_OPENMP=ON -DKokkos_ENABLE_SERIAL=ON -DKokkos_ENABLE_TESTS=OFF >"$work/configure.log" 2>&1 ||
      { cat "$work/configure.log" >&2; exit 1; }
    cmake --build "$work/build" -j "$(nproc)" >"$work/build.log" 2>&1 || { tail -50 "$work/build.log" >&2; exit 1; }
    cmake --install "$work/build" >"$work/install.log" 2>&1 || { cat "$work/install.log" >&2; exit 1; }
    touch "$prefix/.pmewald-complete"
    rm -rf "$work"
  fi
  echo "$prefix"
}

ensure_package() {
  local want have extra=()
  # The editable install lists the package's modules by path: a module added, moved or
  # removed needs a reinstall as a C++ change does.
  want="$(hash_of CMakeLists.txt pyproject.toml cmake cpp)-$(module_list)"
  if [ "$KOKKOS_VARIANT" = openmp ]; then
    local kokkos
    kokkos="$(ensure_kokkos_openmp)"
    want="$want-$kokkos"
    extra=(-Ccmake.define.Kokkos_ROOT="$kokkos" -Cbuild-dir="build/kokkos-openmp/{wheel_tag}")
  fi
  have="$(cat "$VENV/.pmewald-build" 2>/dev/null || true)"
  if [ "$want" != "$have" ] || ! "$PY" -c 'import pmewald._core' >/dev/null 2>&1; then
    log "building pmewald into $(basename "$VENV") (editable, Kokkos: $KOKKOS_VARIANT)"
    "$PY" -m pip install -q --no-build-isolation --no-deps -e . \
      -Ccmake.define.CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" -Cbuild.verbose=false "${extra[@]}"
    echo "$want" >"$VENV/.pmewald-build"
  fi
}

# Debian's LAMMPS Python module lives in the system Python's dist-packages: the venv gets a link
# to that one package (not the whole directory, whose other packages would shadow the venv's).
ensure_lammps_module() {
  local src=/usr/lib/python3/dist-packages/lammps site
  [ -d "$src" ] || return 0
  site="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  [ "$(readlink "$site/lammps" 2>/dev/null)" = "$src" ] || ln -sfn "$src" "$site/lammps"
}

setup() {
  ensure_system_packages
  mpi_env
  ensure_venv
  ensure_lammps_module
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
SAN_TESTS=(tests/fft/test_fft.py tests/fft/test_real_fft.py tests/comm/test_exchange.py tests/pme/test_kernels.py
           tests/tuning/test_error_estimates.py tests/realspace/test_realspace.py tests/particles/test_migration.py tests/particles/test_ghost_exchange.py
           tests/particles/test_balance.py tests/pme/test_pme.py tests/base/test_simd.py tests/pme/test_potentials.py tests/realspace/test_mixed_precision.py tests/pme/test_charge_sets.py)
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
  # intercept_tls_get_addr=0: GCC 12's runtime tracks the dynamic TLS blocks of dlopen'ed
  # libraries through __tls_get_addr and, with Debian 12's glibc, sometimes records a bogus
  # one ("DTLS 10 at 0x000000008346-0x000400009448" with LSAN_OPTIONS=verbosity=1); the leak
  # check's stop-the-world tracer then reads it and dies ("Tracer caught signal 11:
  # addr=0x8348 ... LeakSanitizer has encountered a fatal error"): 3 of 4 runs at one point,
  # whatever the tests did (google/sanitizers#1353). Without the interception those blocks
  # are not scanned as roots; nothing of ours keeps heap memory only in a thread_local.
  env PMEWALD_SANITIZE_PRELOAD="$asan $stdcxx $SAN/libkeep_loaded.so" PYTHONMALLOC=malloc \
    ASAN_OPTIONS="detect_leaks=1:leak_check_at_exit=0:halt_on_error=1:intercept_tls_get_addr=0:log_path=$logs/asan:log_exe_name=1:${ASAN_OPTIONS:-}" \
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

# The whole suite in two phases (docs/testing.md, "How long the suite takes"). First what
# needs the machine to itself: the MPI batches (2-4 ranks, oversubscribed where there are
# fewer cores) and the tests marked `exclusive` (their own mpirun, threads, shared build
# trees). Then every other test in one pytest-xdist worker per core, whole files per worker
# (module fixtures are built once). Both phases always run; the result fails if either does.
whole_suite() {
  local rc1=0 rc2=0 n t0 workers=()
  n="$(nproc)"
  t0=$SECONDS
  [ "$n" -gt 1 ] && workers=(-n "$n" --dist loadfile)
  log "suite, phase 1 of 2: the MPI batches and the exclusive tests"
  "$PY" -m pytest -m "mpi_batch or exclusive" || rc1=$?
  log "suite, phase 2 of 2: the other tests in $n worker(s)"
  "$PY" -m pytest -m "not mpi_batch and not exclusive" "${workers[@]}" || rc2=$?
  log "suite: phase 1 exit $rc1, phase 2 exit $rc2, $((SECONDS - t0)) s"
  [ "$rc1" = 0 ] && [ "$rc2" = 0 ]
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
    [ $# -gt 0 ] && exec "$PY" -m pytest "$@"
    whole_suite
    ;;
  sanitize)
    setup
    sanitize "$@"
    ;;
  test-openmp)
    # Both builds; the Serial one computes the reference of tests/base/test_backends.py.
    # Then the PME, FFT and real-space tests on the OpenMP build, on 1 rank x 2 threads
    # and on 2 ranks x 1 thread: never more threads than the 2 cores of the
    # development machine (docs/install.md, Threads and ranks).
    PMEWALD_KOKKOS=system bash "$0" setup
    PMEWALD_KOKKOS=openmp bash "$0" setup
    mpi_env
    export CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)"
    export PMEWALD_BACKEND_REFERENCE="$ROOT/build/backend-reference-serial.npz"
    OMP_NUM_THREADS=1 "$ROOT/.venv/bin/python" tests/backend_cases.py "$PMEWALD_BACKEND_REFERENCE"
    # Idle threads sleep instead of spinning: the CI machine is shared, and a spinning
    # thread there holds a core another process needs (docs/install.md).
    export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
    omp_tests=(tests/base/test_backends.py tests/pme/test_pme.py tests/fft/test_fft.py tests/fft/test_real_fft.py
               tests/realspace/test_realspace.py tests/particles/test_migration.py tests/particles/test_migration_order.py
               tests/particles/test_ghost_exchange.py tests/particles/test_balance.py tests/realspace/test_pair_list.py
               tests/pme/test_kernels.py tests/pme/test_potentials.py tests/realspace/test_mixed_precision.py tests/pme/test_charge_sets.py
               tests/realspace/test_cluster_pairs.py)
    log "OpenMP build: 1 rank x 2 threads"
    OMP_NUM_THREADS=2 "$ROOT/.venv-openmp/bin/python" -m pytest -k "not mpi2 and not mpi3 and not mpi4" \
      "${omp_tests[@]}" "$@"
    log "OpenMP build: 2 ranks x 1 thread"
    OMP_NUM_THREADS=1 "$ROOT/.venv-openmp/bin/python" -m pytest -k "mpi2" "${omp_tests[@]}" "$@"
    # The threading contract on the OpenMP build (Kokkos 3.x's OpenMP backend runs kernels
    # only from the thread that initialised it: base/kokkos_runtime.hpp attaches the others).
    # 2 ranks x 2 Python threads x 1 OpenMP thread: already more threads than cores.
    log "OpenMP build: two Python threads per rank"
    OMP_NUM_THREADS=1 exec "$ROOT/.venv-openmp/bin/python" -m pytest tests/reliability/test_thread_stress.py \
      tests/reliability/test_reliability.py -k "thread_stress or own_communicators or threads_two_objects" "$@"
    ;;
  *)
    echo "usage: scripts/dev.sh {setup|demo|test|sanitize|test-openmp} [args...]" >&2
    exit 2
    ;;
esac
