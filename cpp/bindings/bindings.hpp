// Declarations shared by the binding files; each bind_*.cpp adds one area.
#pragma once

#include <pybind11/pybind11.h>

#include "geometry/index_box.hpp"

namespace pmewald::bindings {

void bind_config(pybind11::module_& m);
void bind_geometry(pybind11::module_& m);
void bind_realspace(pybind11::module_& m);
void bind_fft(pybind11::module_& m);
void bind_kernels(pybind11::module_& m);
void bind_pme(pybind11::module_& m);

pybind11::tuple box_to_python(const Box3& b);
Box3 box_from_python(const pybind11::handle& obj, const char* argument);

}  // namespace pmewald::bindings
