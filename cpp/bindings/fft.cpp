// Python view of the distributed FFT (FFT3d) and of the generic exchange plan.
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
#include "comm/exchange.hpp"
#include "fft/fft3d.hpp"
#include "fft/fftw_serial.hpp"
#include "fft/rfft3d.hpp"
#include "bindings/bindings.hpp"
#include "bindings/pycomm.hpp"

namespace py = pybind11;

namespace pmewald::bindings {

namespace {

unsigned fftw_flags_from_string(const std::string& s) {
  if (s == "estimate") return FFTW_ESTIMATE;
  if (s == "measure") return FFTW_MEASURE;
  if (s == "patient") return FFTW_PATIENT;
  if (s == "exhaustive") return FFTW_EXHAUSTIVE;
  throw ValueError("planner must be one of 'estimate', 'measure', 'patient', 'exhaustive', not '" + s + "'");
}

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
  for (int d = 0; ok && d < 3; ++d) ok = a.shape(d) == shape[d];
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

py::dict stats_dict(const ExchangeStats& s) {
  py::dict d;
  d["executions"] = s.executions;
  d["messages_sent"] = s.messages_sent;
  d["messages_received"] = s.messages_received;
  d["bytes_sent"] = s.bytes_sent;
  d["bytes_received"] = s.bytes_received;
  d["self_bytes"] = s.self_bytes;
  d["pack_seconds"] = s.pack_seconds;
  d["wait_seconds"] = s.wait_seconds;
  d["unpack_seconds"] = s.unpack_seconds;
  d["self_seconds"] = s.self_seconds;
  return d;
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
    flags = fftw_flags_from_string(planner);
  } catch (const ValueError& e) {
    err = e.what();
  }
  agree_or_throw(comm, err);
}

// stats() of FFT3d and RealFFT3d: per-remap exchange counters, FFT time and counts.
template <class F>
py::dict fft_stats(const F& f) {
  py::dict d;
  for (Direction dir : {Direction::Forward, Direction::Reverse})
    for (int t = 0; t < F::kRemaps; ++t) {
      py::dict s = stats_dict(f.remap_stats(t, dir));
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

py::array transform(FFT3d& fft, const py::object& a, const py::object& out, bool fwd) {
  const Box3& src_box = fwd ? fft.inbox() : fft.outbox();
  const Box3& dst_box = fwd ? fft.outbox() : fft.inbox();
  std::string err = check_array(a, fwd ? "a" : "b", src_box.shape(), false);
  if (err.empty() && !out.is_none()) err = check_array(out, "out", dst_box.shape(), true);
  agree_or_throw(fft.comm(), err);
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
py::array real_forward(RealFFT3d& fft, const py::object& a, const py::object& out) {
  std::string err = check_array<double>(a, "a", fft.in_storage().shape(), false, "this rank's input storage box");
  if (err.empty() && !out.is_none()) err = check_array(out, "out", fft.outbox().shape(), true);
  agree_or_throw(fft.comm(), err);
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

py::array real_backward(RealFFT3d& fft, const py::object& b, const py::object& out, bool normalise) {
  std::string err = check_array(b, "b", fft.outbox().shape(), false);
  if (err.empty() && !out.is_none())
    err = check_array<double>(out, "out", fft.in_storage().shape(), true, "this rank's input storage box");
  agree_or_throw(fft.comm(), err);
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

// A Python handle on a generic exchange: owns a duplicate communicator, the plan,
// and executors for float64 and complex128 data (tests and experiments).
struct PyExchange {
  std::unique_ptr<Comm> comm;
  std::shared_ptr<const ExchangePlan> plan;
  std::unique_ptr<ExchangeExecutor<double>> real;
  std::unique_ptr<ExchangeExecutor<Complex>> cplx;
};

template <class T>
void run_exchange(ExchangeExecutor<T>& ex, const ExchangePlan& plan, py::array src, py::array dst, Direction dir,
                  UnpackOp op) {
  std::string err;
  if (src.size() != plan.source_size(dir) || dst.size() != plan.destination_size(dir))
    err = "src must hold " + std::to_string(plan.source_size(dir)) + " and dst " +
          std::to_string(plan.destination_size(dir)) + " elements";
  else if (!(src.flags() & py::array::c_style) || !(dst.flags() & py::array::c_style) || !dst.writeable())
    err = "src and dst must be C-contiguous (and dst writeable)";
  agree_or_throw(plan.comm(), err);
  const T* s = reinterpret_cast<const T*>(src.data());
  T* d = reinterpret_cast<T*>(dst.mutable_data());
  py::gil_scoped_release release;
  ex.execute(s, d, dir, op);
}

}  // namespace

void bind_fft(py::module_& m) {
  py::class_<FFT3d>(m, "FFT3d", "Distributed 3-D complex FFT (C++ core of pmewald.DistributedFFT).")
      .def(py::init([](py::object comm, const Int3& mesh, py::handle inbox, py::handle outbox,
                       const std::string& mode, const std::string& planner, bool self_via_mpi) {
             MPI_Comm c = comm_from_python(comm, "comm");
             const Box3 in = box_from_python(inbox, "inbox");
             const Box3 out = box_from_python(outbox, "outbox");
             FFTOptions o;
             options_from_python(c, mode, planner, o.mode, o.fftw_flags);
             o.collective_self_via_mpi = self_via_mpi;
             // The GIL stays held: FFTW's planner is not thread-safe.
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
           [](FFT3d& f, py::object a, py::object out) { return transform(f, a, out, true); }, py::arg("a"),
           py::arg("out") = py::none())
      .def("backward",
           [](FFT3d& f, py::object b, py::object out) { return transform(f, b, out, false); }, py::arg("b"),
           py::arg("out") = py::none())
      .def("stats", [](const FFT3d& f) { return fft_stats(f); })
      .def("reset_stats", &FFT3d::reset_stats);

  py::class_<RealFFT3d>(m, "RealFFT3d",
                        "Distributed 3-D real-to-complex FFT (C++ core of pmewald.DistributedRealFFT).")
      .def(py::init([](py::object comm, const Int3& mesh, py::handle inbox, py::handle outbox,
                       const std::string& mode, const std::string& planner, py::object in_storage,
                       int halved_axis, bool self_via_mpi) {
             MPI_Comm c = comm_from_python(comm, "comm");
             const Box3 in = box_from_python(inbox, "inbox");
             const Box3 out = box_from_python(outbox, "outbox");
             RealFFTOptions o;
             if (!in_storage.is_none()) o.in_storage = box_from_python(in_storage, "in_storage");
             options_from_python(c, mode, planner, o.mode, o.fftw_flags);
             o.halved_axis = halved_axis;
             o.collective_self_via_mpi = self_via_mpi;
             return std::make_unique<RealFFT3d>(c, mesh, in, out, o);
           }),
           py::arg("comm"), py::arg("mesh"), py::arg("inbox"), py::arg("outbox"), py::arg("comm_mode"),
           py::arg("planner"), py::arg("in_storage") = py::none(), py::arg("halved_axis") = 0,
           py::arg("collective_self_via_mpi") = kCollectiveSelfViaMpi)
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
      .def("forward", [](RealFFT3d& f, py::object a, py::object out) { return real_forward(f, a, out); },
           py::arg("a"), py::arg("out") = py::none())
      .def("backward",
           [](RealFFT3d& f, py::object b, py::object out, bool normalise) {
             return real_backward(f, b, out, normalise);
           },
           py::arg("b"), py::arg("out") = py::none(), py::arg("normalise") = true)
      .def("stats",
           [](const RealFFT3d& f) {
             py::dict d = fft_stats(f);
             d["fft"]["unaligned_copies"] = f.unaligned_copies();
             return d;
           })
      .def("reset_stats", &RealFFT3d::reset_stats);

  m.def("buffer_allocations", &buffer_allocations,
        "Process-wide count of buffers allocated by the exchange, remap and FFT layers.");
  m.def(
      "fftw_serial_pair_times",
      [](const Int3& mesh, int repeats, const std::string& planner) {
        return fftw_serial_pair_times(mesh, repeats, fftw_flags_from_string(planner));
      },
      py::arg("mesh"), py::arg("repeats"), py::arg("planner") = "measure",
      "Seconds of each forward+backward pair of FFTW's serial 3-D transform (fftw_plan_dft_3d).");

  m.def(
      "fftw_serial_r2c_pair_times",
      [](const Int3& mesh, int repeats, const std::string& planner) {
        return fftw_serial_r2c_pair_times(mesh, repeats, fftw_flags_from_string(planner));
      },
      py::arg("mesh"), py::arg("repeats"), py::arg("planner") = "measure",
      "Seconds of each r2c+c2r pair of FFTW's serial 3-D real transform (fftw_plan_dft_r2c_3d / c2r_3d).");

  py::class_<FFTWSerialReal3d>(m, "FFTWSerialReal3d", "FFTW's serial 3-D real transform, for benchmark references.")
      .def(py::init([](const Int3& mesh, const std::string& planner) {
             return std::make_unique<FFTWSerialReal3d>(mesh, fftw_flags_from_string(planner));
           }),
           py::arg("mesh"), py::arg("planner") = "measure")
      .def("pair_seconds", [](FFTWSerialReal3d& f) {
        py::gil_scoped_release release;
        return f.pair_seconds();
      });

  py::class_<FFTWSerial3d>(m, "FFTWSerial3d", "FFTW's serial 3-D transform, for benchmark references.")
      .def(py::init([](const Int3& mesh, const std::string& planner) {
             return std::make_unique<FFTWSerial3d>(mesh, fftw_flags_from_string(planner));
           }),
           py::arg("mesh"), py::arg("planner") = "measure")
      .def("pair_seconds", [](FFTWSerial3d& f) {
        py::gil_scoped_release release;
        return f.pair_seconds();
      });

  py::class_<PyExchange>(m, "Exchange", "Generic exchange plan with executors (for tests).")
      .def(py::init([](py::object comm, const std::string& mode, std::vector<int> send_ranks,
                       std::vector<std::vector<Index>> send_indices, std::vector<int> recv_ranks,
                       std::vector<std::vector<Index>> recv_indices, std::vector<Index> self_src,
                       std::vector<Index> self_dst, std::int64_t src_size, std::int64_t dst_size) {
             MPI_Comm c = comm_from_python(comm, "comm");
             const CommMode cm = comm_mode_from_string(mode);
             auto h = std::make_unique<PyExchange>();
             h->comm = std::make_unique<Comm>(c);
             ExchangeLists L{std::move(send_ranks), std::move(send_indices), std::move(recv_ranks),
                             std::move(recv_indices), std::move(self_src), std::move(self_dst), src_size, dst_size};
             h->plan = std::make_shared<const ExchangePlan>(h->comm->get(), std::move(L));
             h->real = make_executor<double>(cm, h->plan);
             h->cplx = make_executor<Complex>(cm, h->plan);
             return h;
           }),
           py::arg("comm"), py::arg("comm_mode"), py::arg("send_ranks"), py::arg("send_indices"),
           py::arg("recv_ranks"), py::arg("recv_indices"), py::arg("self_src"), py::arg("self_dst"),
           py::arg("src_size"), py::arg("dst_size"))
      .def(
          "execute",
          [](PyExchange& h, py::array src, py::array dst, bool reverse, bool add) {
            const Direction dir = reverse ? Direction::Reverse : Direction::Forward;
            const UnpackOp op = add ? UnpackOp::Add : UnpackOp::Assign;
            std::string err;
            const bool is_real = src.dtype().is(py::dtype::of<double>()) && dst.dtype().is(py::dtype::of<double>());
            const bool is_cplx = src.dtype().is(py::dtype::of<std::complex<double>>()) &&
                                 dst.dtype().is(py::dtype::of<std::complex<double>>());
            if (!is_real && !is_cplx) err = "src and dst must both be float64 or both complex128";
            agree_or_throw(h.plan->comm(), err);
            if (is_real)
              run_exchange(*h.real, *h.plan, src, dst, dir, op);
            else
              run_exchange(*h.cplx, *h.plan, src, dst, dir, op);
          },
          py::arg("src"), py::arg("dst"), py::arg("reverse") = false, py::arg("add") = false)
      .def_property_readonly("component", [](const PyExchange& h) { return h.plan->component(); })
      .def("stats", [](const PyExchange& h, bool reverse, bool complex_data) {
             const Direction dir = reverse ? Direction::Reverse : Direction::Forward;
             return stats_dict(complex_data ? h.cplx->stats(dir) : h.real->stats(dir));
           },
           py::arg("reverse") = false, py::arg("complex_data") = false);
}

}  // namespace pmewald::bindings
