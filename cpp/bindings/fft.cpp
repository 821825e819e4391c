// Python view of the distributed FFTs (FFT3d, RealFFT3d) and FFTW's serial
// references; test hooks: every rank's stage plan and remap lists without MPI.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <complex>
#include <algorithm>
#include <memory>
#include <optional>
#include <type_traits>
#include <sstream>

#include "comm/mpi_helpers.hpp"
#include "base/errors.hpp"
#include "base/fftw_planner.hpp"
#include "comm/exchange.hpp"
#include "fft/fft3d.hpp"
#include "fft/fftw_serial.hpp"
#include "fft/remap.hpp"
#include "fft/rfft3d.hpp"
#include "fft/stage_plan.hpp"
#include "bindings/bindings.hpp"
#include "bindings/pycomm.hpp"

namespace py = pybind11;

namespace pmewald::bindings {

namespace {

std::string shape_str(const Int3& s) {
  std::ostringstream o;
  o << "(" << s[0] << ", " << s[1] << ", " << s[2] << ")";
  return o.str();
}

// Local check of an array argument: "" when fine, else what is wrong.
template <class T = std::complex<double>>
std::string check_array(const py::handle& obj, const char* name, const Int3& shape, bool writeable,
                        const char* what = "this rank's box") {
  if (!py::isinstance<py::array>(obj)) return std::string(name) + " must be a numpy array";
  auto a = py::reinterpret_borrow<py::array>(obj);
  if (!a.dtype().is(py::dtype::of<T>()))
    return std::string(name) + " must have dtype " + (std::is_same_v<T, double> ? "float64" : "complex128") +
           ", not " + std::string(py::str(a.dtype()));
  bool ok = a.ndim() == 3;
  if (static_cast<std::int64_t>(shape[0]) * shape[1] * shape[2] == 0) {
    ok = ok && a.size() == 0;  // an empty box: any empty 3-D array (e.g. (1, 7, 0) for a box empty along z)
  } else {
    for (int d = 0; ok && d < 3; ++d) ok = a.shape(d) == shape[d];
  }
  if (!ok) {
    std::ostringstream o;
    o << name << " must have shape " << shape_str(shape) << " (" << what << "), not (";
    for (py::ssize_t d = 0; d < a.ndim(); ++d) o << (d ? ", " : "") << a.shape(d);
    o << (a.ndim() == 1 ? ",)" : ")");
    return o.str();
  }
  if (!(a.flags() & py::array::c_style)) return std::string(name) + " must be C-contiguous";
  if (writeable && !a.writeable()) return std::string(name) + " must be writeable";
  return "";
}

// Runs fft.forward / backward on numpy arrays after a collective argument check.
// The FFT's comm mode and planner from their names, agreed over `comm` first:
// a bad name on one rank only must not leave the others waiting in the
// constructor's collectives (ValueError on every rank).
void options_from_python(MPI_Comm comm, const std::string& mode, const std::string& planner, CommMode& cm,
                         unsigned& flags) {
  std::string err;
  cm = CommMode::Nonblocking;
  flags = FFTW_MEASURE;
  try {
    cm = comm_mode_from_string(mode);
    flags = fftw_flags_or_throw(planner);
  } catch (const ValueError& e) {
    err = e.what();
  }
  agree_on_arguments(comm, err, false);
}

// stats() of FFT3d and RealFFT3d: per-remap exchange counters, FFT time and counts.
template <class F>
py::dict fft_stats(const F& f) {
  py::dict d;
  for (Direction dir : {Direction::Forward, Direction::Reverse})
    for (int t = 0; t < F::kRemaps; ++t) {
      py::dict s = exchange_stats_to_python(f.remap_stats(t, dir));
      s["active"] = f.remap_active(t);
      d[py::str(F::remap_name(t, dir))] = s;
    }
  py::dict fft;
  fft["forward_seconds"] = f.fft_seconds(Direction::Forward);
  fft["backward_seconds"] = f.fft_seconds(Direction::Reverse);
  fft["forward_executions"] = f.executions(Direction::Forward);
  fft["backward_executions"] = f.executions(Direction::Reverse);
  d["fft"] = fft;
  d["allocations"] = buffer_allocations();
  d["comm_mode"] = std::string(comm_mode_name(f.mode()));
  return d;
}

py::array transform(FFT3d& fft, const py::object& a, const py::object& out, bool fwd, bool agreed) {
  require_mpi_running();
  const Box3& src_box = fwd ? fft.inbox() : fft.outbox();
  const Box3& dst_box = fwd ? fft.outbox() : fft.inbox();
  std::string err = check_array(a, fwd ? "a" : "b", src_box.shape(), false);
  if (err.empty() && !out.is_none()) err = check_array(out, "out", dst_box.shape(), true);
  agree_on_arguments(fft.comm(), err, agreed);
  py::array src = py::reinterpret_borrow<py::array>(a);
  py::array dst = out.is_none()
                      ? py::array(py::dtype::of<std::complex<double>>(),
                                  std::vector<py::ssize_t>{dst_box.size(0), dst_box.size(1), dst_box.size(2)})
                      : py::reinterpret_borrow<py::array>(out);
  const Complex* in = reinterpret_cast<const Complex*>(src.data());
  Complex* o = reinterpret_cast<Complex*>(dst.mutable_data());
  {
    py::gil_scoped_release release;
    if (fwd)
      fft.forward(in, o);
    else
      fft.backward(in, o);
  }
  return dst;
}

// RealFFT3d.forward / backward on numpy arrays after a collective argument check.
// Real arrays have the shape of in_storage() (the inbox unless given).
py::array real_forward(RealFFT3d& fft, const py::object& a, const py::object& out, bool agreed) {
  require_mpi_running();
  std::string err = check_array<double>(a, "a", fft.in_storage().shape(), false, "this rank's input storage box");
  if (err.empty() && !out.is_none()) err = check_array(out, "out", fft.outbox().shape(), true);
  agree_on_arguments(fft.comm(), err, agreed);
  py::array src = py::reinterpret_borrow<py::array>(a);
  const Int3 s = fft.outbox().shape();
  py::array dst = out.is_none() ? py::array(py::dtype::of<std::complex<double>>(), std::vector<py::ssize_t>{s[0], s[1], s[2]})
                                : py::reinterpret_borrow<py::array>(out);
  const double* in = reinterpret_cast<const double*>(src.data());
  Complex* o = reinterpret_cast<Complex*>(dst.mutable_data());
  {
    py::gil_scoped_release release;
    fft.forward(in, o);
  }
  return dst;
}

py::array real_backward(RealFFT3d& fft, const py::object& b, const py::object& out, bool normalise, bool agreed) {
  require_mpi_running();
  std::string err = check_array(b, "b", fft.outbox().shape(), false);
  if (err.empty() && !out.is_none())
    err = check_array<double>(out, "out", fft.in_storage().shape(), true, "this rank's input storage box");
  agree_on_arguments(fft.comm(), err, agreed);
  py::array src = py::reinterpret_borrow<py::array>(b);
  const Int3 s = fft.in_storage().shape();
  py::array dst = out.is_none() ? py::array(py::dtype::of<double>(), std::vector<py::ssize_t>{s[0], s[1], s[2]})
                                : py::reinterpret_borrow<py::array>(out);
  if (out.is_none() && fft.in_storage() != fft.inbox())
    std::fill_n(static_cast<double*>(dst.mutable_data()), dst.size(), 0.0);  // outside the inbox: zeros
  const Complex* in = reinterpret_cast<const Complex*>(src.data());
  double* o = reinterpret_cast<double*>(dst.mutable_data());
  {
    py::gil_scoped_release release;
    fft.backward(in, o, normalise);
  }
  return dst;
}

template <class Reference>
void bind_fftw_serial(py::module_& m, const char* name, const char* doc) {
  py::class_<Reference>(m, name, doc)
      .def(py::init([](const Int3& mesh, const std::string& planner) {
             return std::make_unique<Reference>(mesh, fftw_flags_or_throw(planner));
           }),
           py::arg("mesh"), py::arg("planner") = "measure")
      .def("pair_seconds", [](Reference& f) {
        py::gil_scoped_release release;
        return f.pair_seconds();
      });
}

}  // namespace

// Longer than 150 lines because it is a list of independent declarations (one .def per bound
// class, method or function, each with its docstring); there are no steps to split.
void bind_fft(py::module_& m, py::module_& testing) {
  py::class_<FFT3d>(m, "FFT3d", "Distributed 3-D complex FFT (C++ core of pmewald.DistributedFFT).")
      .def(py::init([](py::object comm, const Int3& mesh, py::handle inbox, py::handle outbox,
                       const std::string& mode, const std::string& planner, bool self_via_mpi) {
             MPI_Comm c = comm_from_python(comm, "comm");
             const Box3 in = box_from_python(inbox, "inbox");
             const Box3 out = box_from_python(outbox, "outbox");
             FFTOptions o;
             options_from_python(c, mode, planner, o.mode, o.fftw_flags);
             o.collective_self_via_mpi = self_via_mpi;
             // Collective and long (planning): the GIL is released; FFTW's planner is
             // serialised by fftw_planner_mutex() (base/fftw_planner.hpp).
             py::gil_scoped_release nogil;
             return std::make_unique<FFT3d>(c, mesh, in, out, o);
           }),
           py::arg("comm"), py::arg("mesh"), py::arg("inbox"), py::arg("outbox"), py::arg("comm_mode"),
           py::arg("planner"), py::arg("collective_self_via_mpi") = kCollectiveSelfViaMpi)
      .def_property_readonly("inbox", [](const FFT3d& f) { return box_to_python(f.inbox()); })
      .def_property_readonly("outbox", [](const FFT3d& f) { return box_to_python(f.outbox()); })
      .def_property_readonly("x_pencil", [](const FFT3d& f) { return box_to_python(f.x_pencil()); })
      .def_property_readonly("y_pencil", [](const FFT3d& f) { return box_to_python(f.y_pencil()); })
      .def_property_readonly("z_pencil", [](const FFT3d& f) { return box_to_python(f.z_pencil()); })
      .def_property_readonly("mesh", [](const FFT3d& f) { return f.mesh(); })
      .def_property_readonly("comm_mode", [](const FFT3d& f) { return std::string(comm_mode_name(f.mode())); })
      .def("stage_order", [](const FFT3d& f, int s) { return f.stage_order(s); }, py::arg("stage"))
      .def("remap_active", &FFT3d::remap_active, py::arg("t"))
      .def_property_readonly("fft_groups", &FFT3d::fft_groups)
      .def("forward",
           [](FFT3d& f, py::object a, py::object out, bool agreed) { return transform(f, a, out, true, agreed); },
           py::arg("a"), py::arg("out") = py::none(), py::arg("agreed") = false)
      .def("backward",
           [](FFT3d& f, py::object b, py::object out, bool agreed) { return transform(f, b, out, false, agreed); },
           py::arg("b"), py::arg("out") = py::none(), py::arg("agreed") = false)
      .def("stats", [](const FFT3d& f) { return fft_stats(f); })
      .def("reset_stats", &FFT3d::reset_stats);

  py::class_<RealFFT3d>(m, "RealFFT3d",
                        "Distributed 3-D real-to-complex FFT (C++ core of pmewald.DistributedRealFFT).")
      .def(py::init([](py::object comm, const Int3& mesh, py::handle inbox, py::handle outbox,
                       const std::string& mode, const std::string& planner, py::object in_storage,
                       int halved_axis, bool self_via_mpi, bool contiguous_real_x, bool pair_real_lines) {
             MPI_Comm c = comm_from_python(comm, "comm");
             const Box3 in = box_from_python(inbox, "inbox");
             const Box3 out = box_from_python(outbox, "outbox");
             RealFFTOptions o;
             o.contiguous_real_x = contiguous_real_x;
             o.pair_real_lines = pair_real_lines;
             if (!in_storage.is_none()) o.in_storage = box_from_python(in_storage, "in_storage");
             options_from_python(c, mode, planner, o.mode, o.fftw_flags);
             o.halved_axis = halved_axis;
             o.collective_self_via_mpi = self_via_mpi;
             py::gil_scoped_release nogil;  // as for FFT3d
             return std::make_unique<RealFFT3d>(c, mesh, in, out, o);
           }),
           py::arg("comm"), py::arg("mesh"), py::arg("inbox"), py::arg("outbox"), py::arg("comm_mode"),
           py::arg("planner"), py::arg("in_storage") = py::none(), py::arg("halved_axis") = 0,
           py::arg("collective_self_via_mpi") = kCollectiveSelfViaMpi, py::arg("contiguous_real_x") = false,
           py::arg("pair_real_lines") = true)
      .def_property_readonly("contiguous_real_x", [](const RealFFT3d& f) { return f.options().contiguous_real_x; })
      .def_property_readonly("paired_real_lines", &RealFFT3d::paired_real_lines)
      .def_property_readonly("inbox", [](const RealFFT3d& f) { return box_to_python(f.inbox()); })
      .def_property_readonly("in_storage", [](const RealFFT3d& f) { return box_to_python(f.in_storage()); })
      .def_property_readonly("outbox", [](const RealFFT3d& f) { return box_to_python(f.outbox()); })
      .def_property_readonly("real_x_pencil", [](const RealFFT3d& f) { return box_to_python(f.real_x_pencil()); })
      .def_property_readonly("x_pencil", [](const RealFFT3d& f) { return box_to_python(f.x_pencil()); })
      .def_property_readonly("y_pencil", [](const RealFFT3d& f) { return box_to_python(f.y_pencil()); })
      .def_property_readonly("z_pencil", [](const RealFFT3d& f) { return box_to_python(f.z_pencil()); })
      .def_property_readonly("mesh", [](const RealFFT3d& f) { return f.mesh(); })
      .def_property_readonly("spectrum_mesh", [](const RealFFT3d& f) { return f.spectrum_mesh(); })
      .def_property_readonly("halved_axis", &RealFFT3d::halved_axis)
      .def_property_readonly("comm_mode", [](const RealFFT3d& f) { return std::string(comm_mode_name(f.mode())); })
      .def("stage_order", [](const RealFFT3d& f, int s) { return f.stage_order(s); }, py::arg("stage"))
      .def("remap_active", &RealFFT3d::remap_active, py::arg("t"))
      .def_property_readonly("fft_groups", &RealFFT3d::fft_groups)
      .def("forward",
           [](RealFFT3d& f, py::object a, py::object out, bool agreed) { return real_forward(f, a, out, agreed); },
           py::arg("a"), py::arg("out") = py::none(), py::arg("agreed") = false)
      .def("backward",
           [](RealFFT3d& f, py::object b, py::object out, bool normalise, bool agreed) {
             return real_backward(f, b, out, normalise, agreed);
           },
           py::arg("b"), py::arg("out") = py::none(), py::arg("normalise") = true, py::arg("agreed") = false)
      .def("stats",
           [](const RealFFT3d& f) {
             py::dict d = fft_stats(f);
             d["fft"]["unaligned_copies"] = f.unaligned_copies();
             return d;
           })
      .def("reset_stats", &RealFFT3d::reset_stats);

  m.def(
      "fftw_serial_pair_times",
      [](const Int3& mesh, int repeats, const std::string& planner) {
        return fftw_serial_pair_times(mesh, repeats, fftw_flags_or_throw(planner));
      },
      py::arg("mesh"), py::arg("repeats"), py::arg("planner") = "measure",
      "Seconds of each forward+backward pair of FFTW's serial 3-D transform (fftw_plan_dft_3d).");

  m.def(
      "fftw_serial_r2c_pair_times",
      [](const Int3& mesh, int repeats, const std::string& planner) {
        return fftw_serial_r2c_pair_times(mesh, repeats, fftw_flags_or_throw(planner));
      },
      py::arg("mesh"), py::arg("repeats"), py::arg("planner") = "measure",
      "Seconds of each r2c+c2r pair of FFTW's serial 3-D real transform (fftw_plan_dft_r2c_3d / c2r_3d).");

  bind_fftw_serial<FFTWSerialReal3d>(m, "FFTWSerialReal3d", "FFTW's serial 3-D real transform, for benchmark references.");
  bind_fftw_serial<FFTWSerial3d>(m, "FFTWSerial3d", "FFTW's serial 3-D transform, for benchmark references.");

  auto t = testing.def_submodule("fft", "The distributed FFTs' stage plans and remap lists, without MPI.");
  t.def(
      "remap_plans",
      [](const std::string& kind, const Int3& mesh, const py::list& inboxes, const py::list& outboxes,
         int halved_axis) {
        if (kind != "complex" && kind != "real") throw ValueError("kind must be 'complex' or 'real'");
        std::vector<Box3> ins, outs;
        for (auto b : inboxes) ins.push_back(box_from_python(b, "inboxes[i]"));
        for (auto b : outboxes) outs.push_back(box_from_python(b, "outboxes[i]"));
        const bool real = kind == "real";
        const std::string why =
            tiling_problem(ins, mesh, outs, real ? spectrum_mesh(mesh, halved_axis) : mesh);
        if (!why.empty()) throw ValueError(why);
        const FFTStages st =
            plan_stages(real ? FFTKind::RealToComplex : FFTKind::Complex, mesh, halved_axis, ins, outs);
        const int P = st.size();
        auto boxes = [](auto&& box_of, int n) {
          py::list l;
          for (int r = 0; r < n; ++r) l.append(box_to_python(box_of(r)));
          return l;
        };
        py::list remaps;
        for (int k = 0; k < 4; ++k) {
          const RemapLayout layout = st.remap_layout(k);
          std::vector<std::int64_t> examined(static_cast<size_t>(P), 0);
          py::dict d = lists_to_python(P, [&](int r) { return remap_lists(layout, r, layout.inbox(r), &examined[r]); });
          d["inbox"] = boxes([&](int r) { return layout.inbox(r); }, P);
          d["outbox"] = boxes([&](int r) { return layout.outbox(r); }, P);
          py::list io, oo, id;
          for (int r = 0; r < P; ++r) {
            io.append(py::make_tuple(layout.in_order(r)[0], layout.in_order(r)[1], layout.in_order(r)[2]));
            oo.append(py::make_tuple(layout.out_order(r)[0], layout.out_order(r)[1], layout.out_order(r)[2]));
            id.append(layout.identity(r));
          }
          d["in_order"] = io;
          d["out_order"] = oo;
          d["identity"] = id;
          d["examined"] = py::array_t<std::int64_t>(examined.size(), examined.data());
          remaps.append(d);
        }
        py::list groups;
        for (const RankStages& r : st.ranks) groups.append(r.groups());
        py::dict out;
        out["remaps"] = remaps;
        out["groups"] = groups;
        out["spectrum"] = st.spectrum;
        return out;
      },
      py::arg("kind"), py::arg("mesh"), py::arg("inboxes"), py::arg("outboxes"), py::arg("halved_axis") = 0,
      "Every rank's stage plan (fft/stage_plan.hpp) of a distributed FFT over these boxes and the "
      "lists of each of its four remaps (fft/remap.hpp's remap_lists, as _testing.comm.halo_plans "
      "gives them), built without MPI: remaps[t] holds the lists, every rank's boxes and orders at "
      "both ends, identity flags and the candidate boxes each rank's index looked at.");
}

}  // namespace pmewald::bindings
