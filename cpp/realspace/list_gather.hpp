// One batch of the reused pair list's evaluation (pair_list.cpp): the stored
// partners of an atom gathered from the interleaved x, y, z, q array into the
// pair kernel's batch arrays, the shell's only where they are within the cutoff
// now. Vectorised for several instruction sets like the neighbour search's
// selection (pair_select.hpp) and chosen at run time (base/simd.hpp).
#pragma once

namespace pmewald {
inline namespace realspace {

// The batch the pair kernel reads: partner index and its x, y, z, q per pair.
struct ListBatch {
  int* sel;
  double *x, *y, *z, *q;
};

// Gathers js[c0..cm) (the inner partners, within the cutoff by construction) all,
// then those of js[cm..c1) with |r_j - r_i|^2 < rc2, each partner j's x, y, z, q
// read from xyzq[4j..4j+3], in the order given; returns how many. The batch
// arrays need room for c1 - c0 + 8 entries (vector stores may write up to 8 slots
// past the count). Every version gives the same batch.
int gather_listed(const int* js, int c0, int cm, int c1, const double* xyzq, double xi, double yi, double zi,
                  double rc2, const ListBatch& out);

// Subtracts the batch's partner forces from a row-major n x 3 force array
// (f[3 sel[b] + d] -= fd[b]); the partners of one batch are distinct atoms.
void scatter_listed(const int* sel, int n, const double* fx, const double* fy, const double* fz, double* f);

}  // namespace realspace
}  // namespace pmewald
