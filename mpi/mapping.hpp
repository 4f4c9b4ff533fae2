#pragma once
// Which MPI datatypes and operators copse reduces with, and as what.
//
// Datatypes: the predefined ones (MPI_Type_get_envelope's combiner
// MPI_COMBINER_NAMED, size equal to extent, lower bound 0) whose values are a
// copse DType: C and Fortran integers of 1, 2, 4 and 8 bytes, signed or not;
// float and double under every name (MPI_REAL, MPI_DOUBLE_PRECISION,
// MPI_REAL8, ...); MPI_BYTE (as uint8) and MPI_CHAR (as int8). Sizes are read
// from the MPI library at start-up, so MPI_LONG or MPI_INTEGER map to
// whatever width they have. Everything else -- derived datatypes, pair types
// for MPI_MAXLOC/MPI_MINLOC, long double, complex, logical -- is not copse's.
//
// Predefined operators are served on the datatypes the MPI standard defines
// them for (MPI-3.1, 5.9.2), so that a pair the MPI library would refuse is
// still refused by the MPI library, in its own words:
//   MPI_SUM, MPI_PROD             C and Fortran integers, floating point
//   MPI_MIN, MPI_MAX              C and Fortran integers, floating point
//   MPI_LAND, MPI_LOR             C integers
//   MPI_BAND, MPI_BOR, MPI_BXOR   C and Fortran integers, MPI_BYTE
// plus MPI_CHAR with MPI_SUM, which the standard leaves undefined but common
// benchmarks use and Open MPI accepts: served as 8-bit wrap-around (what C and
// MPICH do; Open MPI's op/avx saturates instead, ompi issue 8045).
// MPI_MAXLOC, MPI_MINLOC, MPI_LXOR (copse has no logical xor), MPI_REPLACE and
// MPI_NO_OP are not copse's.
//
// User operators (MPI_Op_create) are served on every datatype above, with
// the commute flag the application gave (PMPI_Op_commutative): the copse
// operator applies them through PMPI_Reduce_local(in, inout), which computes
// inout = in (op) inout -- exactly user_op's a (op) b -> b, with `in` the
// lower-ranked operand (common/reduce_op.hpp).

#include <mpi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "common/dtype.hpp"
#include "common/reduce_op.hpp"

namespace copse::mpi {

enum class TypeClass : std::uint8_t { c_integer, fortran_integer, floating, byte, character };

struct ServedType {
  MPI_Datatype handle;
  DType dtype;
  TypeClass kind;
};

class Mapping {
 public:
  // Reads the predefined datatypes' sizes: call after MPI_Init.
  Mapping();

  // The copse view of a predefined datatype; null when copse does not reduce it.
  const ServedType* type(MPI_Datatype handle) const;

  // The operator copse reduces `type` with for `op`; null when the pair is
  // not copse's (the MPI library serves or refuses it). The same (op, type)
  // gives the same operator, identity included (plan caches key by it),
  // valid until forget(op). Thread-safe.
  const ReduceOp* op(MPI_Op op, const ServedType& type);

  // MPI_Op_free: the handle may come back as another operator.
  void forget(MPI_Op op);

 private:
  std::vector<ServedType> types_;
  // The served handles in an open-addressing table, so that a datatype that
  // is not copse's -- a call passed to the MPI library, which should cost
  // next to nothing -- takes a probe or two, not a scan of every entry.
  static constexpr int kSlotBits = 7;
  static constexpr std::size_t kSlots = std::size_t{1} << kSlotBits;  // over twice the entries
  std::array<const ServedType*, kSlots> slots_{};
  static std::size_t slot_of(MPI_Datatype handle);

  struct PredefinedOp {
    MPI_Op handle;
    int builtin;  // index into builtin_, or -1: not served
    // Where MPI defines the operator, by TypeClass: decided once, so that a
    // call's look-up compares no strings (a passed call must cost little).
    std::array<bool, 5> defined_on_kind{};
  };
  std::vector<PredefinedOp> predefined_;
  // [operator][dtype], built once; empty where the operator is not defined.
  std::vector<std::array<std::unique_ptr<const ReduceOp>, 10>> builtin_;

  struct UserOp {
    MPI_Op op;
    MPI_Datatype type;
    std::unique_ptr<const ReduceOp> reduce_op;
  };
  std::mutex user_mutex_;
  std::vector<UserOp> user_;
};

}  // namespace copse::mpi
