#!/usr/bin/env bash
# Set-up for `python -m pmewald.bench peers`: Debian's LAMMPS (binary `lmp`), Debian's
# GROMACS 2022 (binary `gmx`, mixed precision; scripts/dev.sh setup installs it too, for the
# tests) and OpenMM (PyPI, in .venv via scripts/requirements-extra.txt). Idempotent: each
# is installed only when its binary or module is missing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
log() { printf '[pmewald bench-setup] %s\n' "$*" >&2; }
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
# Debian's `lammps` package provides /usr/bin/lmp (MPI-enabled, Open MPI).
if ! command -v lmp >/dev/null 2>&1; then
  log "installing Debian package lammps (provides lmp)"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends lammps >/dev/null
fi
command -v lmp >/dev/null || { log "lmp not found after installing lammps"; exit 1; }
# Debian's `gromacs` package provides /usr/bin/gmx (thread-MPI + OpenMP, mixed precision).
if ! command -v gmx >/dev/null 2>&1; then
  log "installing Debian package gromacs (provides gmx)"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends gromacs >/dev/null
fi
command -v gmx >/dev/null || { log "gmx not found after installing gromacs"; exit 1; }
# pmewald itself, with the extras (OpenMM) installed by the ordinary set-up.
bash scripts/dev.sh setup
if ! .venv/bin/python -c 'import openmm' >/dev/null 2>&1; then
  log "installing OpenMM into .venv"
  .venv/bin/python -m pip install -q "openmm>=8.0"
fi
.venv/bin/python -c 'import matplotlib' >/dev/null 2>&1 || log "matplotlib missing: no PNG plots (pip install matplotlib)"
log "ok: $(command -v lmp), $(command -v gmx) ($(gmx --version 2>/dev/null | sed -n 's/^GROMACS version: *//p')), openmm $(.venv/bin/python -c 'import openmm; print(openmm.__version__)')"
