// The reciprocal (mesh) stages of PMESolver::run, one step each: the B-spline
// stencils, spread, halo reduce, forward FFT, the influence-function solve, the
// backward FFT(s), halo fill and gather (ad or ik); the potentials' extra pieces
// (forces from the unit-charge field, ik's potential mesh, the assembly of every
// term's phi and E); and the per-call views. Construction, options and the pair list are in
// pme_solver.cpp, the call's order of stages in compute_call.cpp.
#include <cmath>
#include <vector>

#include "base/compute_model.hpp"
#include "pme/gather.hpp"
#include "solver/pme_solver.hpp"

namespace pmewald {
inline namespace solver {

// B-spline stencils of the owned atoms from the migration's own fractional
// coordinates, so ownership and stencil base agree to the last bit.
void PMESolver::stencils() {
  static const Mat3 identity{1, 0, 0, 0, 1, 0, 0, 0, 1};
  const double t = wall_seconds();
  compute_stencils(identity, opt_.mesh, opt_.order, migration_.owned_fractional(), halo_->brick(),
                   opt_.differentiation == Differentiation::AD, stencil_);
  timers_.add("spread", wall_seconds() - t);
}

void PMESolver::reciprocal(View1<double> q, SolverResult& res, View2<double> forces, Overlap* overlap,
                           bool potentials) {
  const bool ad = opt_.differentiation == Differentiation::AD;
  const Box3& ext = halo_->extended();
  hidden_mark_ = overlap_ ? overlap_->stats().work_seconds : 0;
  double t = wall_seconds();
  spread(stencil_, q, ext, grid_, true);
  t = lap("spread", t);
  halo_->reduce(grid_.data(), overlap);
  t = lap("ghost", t);
  fft_->forward(grid_.data(), kspace_c_.data(), overlap);
  t = lap("fft", t);
  Virial vir;
  double e_rec = 0;
  if (ad) {
    e_rec = kspace_->apply_ad(kspace_c_.data(), &vir);
    t = lap("solve", t);
    fft_->backward_destroying_input(kspace_c_.data(), grid_.data(), false, overlap);
    t = lap("fft", t);
    halo_->fill(grid_.data(), overlap);
    t = lap("ghost", t);
    if (potentials)  // the field and potential with unit charges, forces from them (bitwise the same)
      gather_ad(stencil_, recip_, opt_.mesh, ones_, ext, grid_, rec_field_, rec_phi_);
    else
      gather_ad(stencil_, recip_, opt_.mesh, q, ext, grid_, forces, View1<double>());
    if (potentials) forces_from_field(q, forces);
    t = lap("gather", t);
  } else {
    e_rec = kspace_->apply_ik(kspace_c_.data(), kfield_[0].data(), kfield_[1].data(), kfield_[2].data(), &vir);
    t = lap("solve", t);
    for (int a = 0; a < 3; ++a) {
      fft_->backward_destroying_input(kfield_[a].data(), field_[a].data(), false, overlap);
      t = lap("fft", t);
      halo_->fill(field_[a].data(), overlap);
      t = lap("ghost", t);
    }
    if (potentials) {
      gather_ik(stencil_, ones_, ext, field_[0], field_[1], field_[2], rec_field_);
      forces_from_field(q, forces);
    } else {
      gather_ik(stencil_, q, ext, field_[0], field_[1], field_[2], forces);
    }
    t = lap("gather", t);
  }
  res.terms["reciprocal"] = e_rec;  // local share; reduced by compute()
  res.virial = vir;
  if (potentials && !ad) ik_potentials(overlap);
}

// F_i = q_i E_i from the field gathered with unit charges: the same numbers as the
// gather with the charges (ad: -q X == q (-X), ik: q (1 X) == q X, exactly).
void PMESolver::forces_from_field(View1<double> q, View2<double> forces) {
  auto e = rec_field_;
  Kokkos::parallel_for(
      "pmewald::forces_from_field", Range(0, forces.extent(0)), KOKKOS_LAMBDA(const std::size_t i) {
        for (int a = 0; a < 3; ++a) forces(i, a) = q(i) * e(i, a);
      });
  Kokkos::fence();
}

// ik's reciprocal potential at the owned atoms, after reciprocal(): ik has no
// potential mesh, so one more solve (ad's factors, on the charges' spectrum that
// apply_ik left as it was) and backward FFT make it, then it is gathered.
void PMESolver::ik_potentials(Overlap* overlap) {
  double t = wall_seconds();
  kspace_->apply_ad(kspace_c_.data(), nullptr);
  t = lap("solve", t);
  fft_->backward_destroying_input(kspace_c_.data(), grid_.data(), false, overlap);
  t = lap("fft", t);
  halo_->fill(grid_.data(), overlap);
  t = lap("ghost", t);
  gather_potential(stencil_, halo_->extended(), grid_, rec_phi_);
  lap("gather", t);
}

void PMESolver::force_views(std::size_t n_own) {
  if (f_real_.extent(0) != n_own || f_real_.extent(1) != 3) {
    f_real_ = View2<double>("pme_f_real", n_own, 3);
    f_rec_ = View2<double>("pme_f_rec", n_own, 3);
  }
}

void PMESolver::potential_views(std::size_t n_own) {
  if (real_pot_.extent(0) != n_own || real_pot_.extent(1) != 4) {
    real_pot_ = View2<double>("pme_real_potentials", n_own, 4);
    rec_field_ = View2<double>("pme_rec_field", n_own, 3);
    rec_phi_ = View1<double>("pme_rec_potential", n_own);
    ones_ = View1<double>("pme_unit_charges", n_own);
    Kokkos::deep_copy(ones_, 1.0);
  }
}

// phi and E of every term at the owned atoms, back to the callers in their order:
// real space (pairs and exclusions, real_pot_), reciprocal (rec_phi_, rec_field_),
// self (d/dq_i of -k alpha/sqrt(pi) sum q^2) and background (of -k pi Q^2/(2 V
// alpha^2), Q the global charge), which have no field. Collective (one reverse).
void PMESolver::assemble_potentials(double total_charge, double* potentials_out, double* fields_out,
                                    std::size_t n) {
  constexpr double kPi = 3.14159265358979323846;
  const double k = opt_.coulomb_constant, a = opt_.alpha;
  const double self = -2.0 * k * a / std::sqrt(kPi);
  const double background = -k * kPi * total_charge / (cell_.volume * a * a);
  const std::size_t n_own = migration_.n_owned();
  auto q = migration_.owned_charges();
  std::vector<double> owned(4 * n_own), back(4 * n);
  for (std::size_t i = 0; i < n_own; ++i) {
    owned[4 * i] = real_pot_(i, 0) + rec_phi_(i) + self * q(i) + background;
    for (int c = 0; c < 3; ++c) owned[4 * i + 1 + c] = real_pot_(i, 1 + c) + rec_field_(i, c);
  }
  migration_.reverse(owned.data(), 4, back.data());
  for (std::size_t i = 0; i < n; ++i) {
    potentials_out[i] = back[4 * i];
    for (int c = 0; c < 3; ++c) fields_out[3 * i + c] = back[4 * i + 1 + c];
  }
}

}  // namespace solver
}  // namespace pmewald
