// Declarations shared by the binding files. One file per folder of the core binds
// that folder: its public part into pmewald._core, its test hooks (what only the
// suite calls) into the private pmewald._core._testing.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <functional>

#include "base/virial.hpp"
#include "comm/exchange.hpp"
#include "geometry/index_box.hpp"
#include "geometry/lattice.hpp"

namespace pmewald::bindings {

void bind_base(pybind11::module_& core);
void bind_geometry(pybind11::module_& core);
void bind_comm(pybind11::module_& testing);
void bind_fft(pybind11::module_& core, pybind11::module_& testing);
void bind_pme(pybind11::module_& testing);
void bind_realspace(pybind11::module_& testing);
void bind_tuning(pybind11::module_& core);
void bind_solver(pybind11::module_& core, pybind11::module_& testing);

using darr = pybind11::array_t<double, pybind11::array::c_style | pybind11::array::forcecast>;

// ((lo_x, lo_y, lo_z), (hi_x, hi_y, hi_z)) <-> Box3 (TypeError naming `argument`).
pybind11::tuple box_to_python(const Box3& b);
Box3 box_from_python(const pybind11::handle& obj, const char* argument);
// A (3, 3) array (rows are lattice vectors) or a length-3 one (orthorhombic), finite.
Mat3 mat3_from_python(const darr& box);
// The 3x3 virial (Virial::matrix) as an array.
pybind11::array_t<double> virial_to_python(const Virial& v);
// An executor's counters as a dict.
pybind11::dict exchange_stats_to_python(const ExchangeStats& s);
// The exchange lists of ranks 0..P-1 as flat arrays (comm.cpp's halo_plans says how).
pybind11::dict lists_to_python(int P, const std::function<ExchangeLists(int)>& lists_of);

}  // namespace pmewald::bindings
