#!/usr/bin/env bash
# Run some tests N times in a row and count the runs that passed (docs/testing.md,
# "Tests that can fail without a code change"): the rule for every test that depends on
# timing, threads or MPI ordering is 20 passes in a row before it lands.
#
#   bash scripts/repeat.sh 20 tests/reliability/test_thread_stress.py
#   bash scripts/repeat.sh 30 tests/reliability/test_reliability.py -k threads_two_objects
#
# Every run is a fresh `python -m pytest -q -p no:cacheprovider <args>` with the .venv's
# interpreter (PMEWALD_KOKKOS=openmp: .venv-openmp's); a run's output is kept in
# build/repeat/run-<k>.log when it fails. Exit status 0 only if all N runs passed.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
n="${1:?usage: scripts/repeat.sh N pytest-args...}"
shift
case "${PMEWALD_KOKKOS:-system}" in
  openmp) PY="$ROOT/.venv-openmp/bin/python" ;;
  *) PY="$ROOT/.venv/bin/python" ;;
esac
[ -x "$PY" ] || { echo "no $PY: run 'bash scripts/dev.sh setup' first" >&2; exit 2; }
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
export OMPI_MCA_rmaps_base_oversubscribe=1
logs="$ROOT/build/repeat"
mkdir -p "$logs"
passed=0
for k in $(seq 1 "$n"); do
  t0=$SECONDS
  if "$PY" -m pytest -q -p no:cacheprovider "$@" >"$logs/run-$k.log" 2>&1; then
    passed=$((passed + 1))
    echo "run $k/$n: passed ($((SECONDS - t0)) s)"
    rm -f "$logs/run-$k.log"
  else
    echo "run $k/$n: FAILED ($((SECONDS - t0)) s), output in build/repeat/run-$k.log"
  fi
done
echo "$passed of $n runs passed"
[ "$passed" -eq "$n" ]
