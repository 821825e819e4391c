#include "particles/exclusions.hpp"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "base/errors.hpp"
#include "comm/mpi_helpers.hpp"
#include "comm/tags.hpp"

namespace pmewald {
inline namespace particles {

namespace {

// Directory rank of an atom id: a mixed hash, so consecutive ids spread out.
inline int directory_of(std::int64_t id, int P) {
  std::uint64_t z = static_cast<std::uint64_t>(id) + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z = z ^ (z >> 31);
  return static_cast<int>(z % static_cast<std::uint64_t>(P));
}

struct DirRecord {
  std::int64_t kind;  // 0: register (a = id, b = owner rank); 1: excluded pair (a, b)
  std::int64_t a, b;
};

struct PairRecord {
  std::int64_t a, b;
};

}  // namespace

ExclusionList::ExclusionList(MPI_Comm comm)
    : comm_(comm), nbx_dir_(comm, tags::kExclusionDirectory), nbx_origin_(comm, tags::kExclusionHolders) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

namespace {
std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}
}  // namespace

void ExclusionList::update(const std::int64_t* ids, std::size_t n_local, const std::int64_t* pairs,
                           std::size_t m) {
  int flags[kFlags], all[kFlags];
  check(ids, n_local, pairs, m, flags);
  check_mpi(MPI_Allreduce(flags, all, kFlags, MPI_INT, MPI_MAX, comm_), "MPI_Allreduce");
  settle(all);
}

void ExclusionList::check(const std::int64_t* ids, std::size_t n_local, const std::int64_t* pairs, std::size_t m,
                          int flags[kFlags]) {
  std::string err;
  for (std::size_t k = 0; k < m && err.empty(); ++k)
    if (pairs[2 * k] == pairs[2 * k + 1])
      err = "exclusions[" + std::to_string(k) + "] pairs atom id " + std::to_string(pairs[2 * k]) +
            " with itself";
  std::uint64_t fp = mix(0x1234567ull, n_local);
  for (std::size_t i = 0; i < n_local; ++i) fp = mix(fp, static_cast<std::uint64_t>(ids[i]));
  fp = mix(fp, m);
  for (std::size_t k = 0; k < 2 * m; ++k) fp = mix(fp, static_cast<std::uint64_t>(pairs[k]));
  flags[0] = valid_ && fp == fingerprint_ ? 0 : 1;
  flags[1] = m > 0 ? 1 : 0;
  flags[2] = err.empty() ? 0 : 1;
  pending_ = Pending{ids, pairs, n_local, m, fp, std::move(err)};
}

void ExclusionList::settle(const int all[kFlags]) {
  const std::int64_t* const ids = pending_.ids;
  const std::int64_t* const pairs = pending_.pairs;
  const std::size_t n_local = pending_.n_local, m = pending_.m;
  const std::uint64_t fp = pending_.fp;
  std::string err = std::move(pending_.err);
  pending_ = Pending{};
  if (all[2]) {
    valid_ = false;
    agree_or_throw(comm_, err);  // throws on every rank
  }
  changed_ = false;
  if (!all[0]) return;  // nothing changed anywhere: keep the lists
  // From here on the lists change (rerouted, or emptied when no rank has pairs any
  // more): a structure built on the old lists (the pair list) must be rebuilt.
  changed_ = true;
  valid_ = false;
  any_ = all[1] != 0;
  off_.assign(n_local + 1, 0);
  ids_.clear();
  if (!any_) {
    valid_ = true;
    fingerprint_ = fp;
    return;
  }

  // Round A: every rank registers its atoms (id -> this rank) at their
  // directory ranks and sends each pair to the directory ranks of both ids.
  std::unordered_map<int, std::size_t> slot;
  std::vector<int> dests;
  std::vector<std::vector<char>> bufs;
  auto buffer_for = [&](int dest) -> std::vector<char>& {
    auto it = slot.find(dest);
    if (it != slot.end()) return bufs[it->second];
    slot.emplace(dest, bufs.size());
    dests.push_back(dest);
    bufs.emplace_back();
    return bufs.back();
  };
  for (std::size_t i = 0; i < n_local; ++i)
    append_bytes(buffer_for(directory_of(ids[i], size_)), DirRecord{0, ids[i], rank_});
  for (std::size_t k = 0; k < m; ++k) {
    const std::int64_t a = pairs[2 * k], b = pairs[2 * k + 1];
    const int da = directory_of(a, size_), db = directory_of(b, size_);
    append_bytes(buffer_for(da), DirRecord{1, a, b});
    if (db != da) append_bytes(buffer_for(db), DirRecord{1, a, b});
  }
  std::vector<int> srcs;
  std::vector<std::vector<char>> recv;
  nbx_dir_.exchange(dests, bufs, srcs, recv);

  // Directory: id -> holder rank; forward each pair to the holders of the
  // ids this rank is the directory of.
  std::unordered_map<std::int64_t, int> holder_of;
  for (const auto& b : recv)
    for (std::size_t j = 0, n = record_count<DirRecord>(b); j < n; ++j) {
      const DirRecord r = read_record<DirRecord>(b, j);
      if (r.kind != 0) continue;
      if (!holder_of.emplace(r.a, static_cast<int>(r.b)).second && err.empty())
        err = "atom id " + std::to_string(r.a) + " is used by more than one atom";
    }
  slot.clear();
  dests.clear();
  bufs.clear();
  for (const auto& b : recv)
    for (std::size_t j = 0, n = record_count<DirRecord>(b); j < n; ++j) {
      const DirRecord r = read_record<DirRecord>(b, j);
      if (r.kind != 1) continue;
      int sent_to = -1;
      for (const std::int64_t e : {r.a, r.b}) {
        if (directory_of(e, size_) != rank_) continue;
        auto it = holder_of.find(e);
        if (it == holder_of.end()) {
          if (err.empty())
            err = "exclusion (" + std::to_string(r.a) + ", " + std::to_string(r.b) +
                  ") names atom id " + std::to_string(e) + ", which no rank passed";
          continue;
        }
        if (it->second == sent_to) continue;
        sent_to = it->second;
        append_bytes(buffer_for(it->second), PairRecord{r.a, r.b});
      }
    }
  nbx_origin_.exchange(dests, bufs, srcs, recv);

  // Holder: CSR of excluded partners per local atom.
  std::unordered_map<std::int64_t, std::size_t> index_of;
  index_of.reserve(n_local);
  for (std::size_t i = 0; i < n_local; ++i) index_of.emplace(ids[i], i);
  std::vector<std::pair<std::size_t, std::int64_t>> entries;
  for (const auto& b : recv)
    for (std::size_t j = 0, n = record_count<PairRecord>(b); j < n; ++j) {
      const PairRecord p = read_record<PairRecord>(b, j);
      auto ia = index_of.find(p.a);
      if (ia != index_of.end()) entries.emplace_back(ia->second, p.b);
      auto ib = index_of.find(p.b);
      if (ib != index_of.end()) entries.emplace_back(ib->second, p.a);
    }
  std::sort(entries.begin(), entries.end());
  entries.erase(std::unique(entries.begin(), entries.end()), entries.end());
  for (const auto& e : entries) off_[e.first + 1] += 1;
  for (std::size_t i = 0; i < n_local; ++i) off_[i + 1] += off_[i];
  ids_.resize(entries.size());
  for (std::size_t k = 0; k < entries.size(); ++k) ids_[k] = entries[k].second;
  agree_or_throw(comm_, err);
  valid_ = true;
  fingerprint_ = fp;
}

}  // namespace particles
}  // namespace pmewald
