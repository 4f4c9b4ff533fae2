#include "mpi/mapping.hpp"

#include <algorithm>
#include <climits>
#include <optional>
#include <string>
#include <string_view>

#include "transport/mpi_link.hpp"

namespace copse::mpi {

namespace {

struct Candidate {
  MPI_Datatype handle;
  TypeClass kind;
  bool is_signed;
};

// The DType of a predefined datatype of `size` bytes, if copse has one.
std::optional<DType> dtype_of(const Candidate& c, MPI_Count size) {
  if (c.kind == TypeClass::floating) {
    if (size == 4) return DType::float32;
    if (size == 8) return DType::float64;
    return std::nullopt;
  }
  switch (size) {
    case 1: return c.is_signed ? DType::int8 : DType::uint8;
    case 2: return c.is_signed ? DType::int16 : DType::uint16;
    case 4: return c.is_signed ? DType::int32 : DType::uint32;
    case 8: return c.is_signed ? DType::int64 : DType::uint64;
    default: return std::nullopt;
  }
}

// MPI's predefined operators in copse's names; "" for those copse leaves to
// the MPI library.
struct OpName {
  MPI_Op handle;
  std::string_view name;
};

// Where the MPI standard defines a predefined operator (see the header).
bool defined_on(std::string_view op, TypeClass kind) {
  using K = TypeClass;
  if (kind == K::character) return op == "sum";  // Open MPI's extension, common in benchmarks
  if (op == "sum" || op == "prod" || op == "min" || op == "max")
    return kind == K::c_integer || kind == K::fortran_integer || kind == K::floating;
  if (op == "land" || op == "lor") return kind == K::c_integer;
  // band, bor, bxor
  return kind == K::c_integer || kind == K::fortran_integer || kind == K::byte;
}

std::size_t index_of(DType t) { return static_cast<std::size_t>(t); }

}  // namespace

Mapping::Mapping() {
  using K = TypeClass;
  const Candidate candidates[] = {
      {MPI_DOUBLE, K::floating, true},
      {MPI_FLOAT, K::floating, true},
      {MPI_INT, K::c_integer, true},
      {MPI_LONG, K::c_integer, true},
      {MPI_UNSIGNED, K::c_integer, false},
      {MPI_UNSIGNED_LONG, K::c_integer, false},
      {MPI_LONG_LONG, K::c_integer, true},
      {MPI_UNSIGNED_LONG_LONG, K::c_integer, false},
      {MPI_CHAR, K::character, true},
      {MPI_BYTE, K::byte, false},
      {MPI_INT32_T, K::c_integer, true},
      {MPI_INT64_T, K::c_integer, true},
      {MPI_UINT32_T, K::c_integer, false},
      {MPI_UINT64_T, K::c_integer, false},
      {MPI_SHORT, K::c_integer, true},
      {MPI_UNSIGNED_SHORT, K::c_integer, false},
      {MPI_SIGNED_CHAR, K::c_integer, true},
      {MPI_UNSIGNED_CHAR, K::c_integer, false},
      {MPI_INT8_T, K::c_integer, true},
      {MPI_INT16_T, K::c_integer, true},
      {MPI_UINT8_T, K::c_integer, false},
      {MPI_UINT16_T, K::c_integer, false},
      {MPI_INTEGER, K::fortran_integer, true},
      {MPI_REAL, K::floating, true},
      {MPI_DOUBLE_PRECISION, K::floating, true},
      {MPI_INTEGER1, K::fortran_integer, true},
      {MPI_INTEGER2, K::fortran_integer, true},
      {MPI_INTEGER4, K::fortran_integer, true},
      {MPI_INTEGER8, K::fortran_integer, true},
      {MPI_REAL4, K::floating, true},
      {MPI_REAL8, K::floating, true},
  };
  types_.reserve(std::size(candidates));  // slots_ points into it
  for (const Candidate& c : candidates) {
    if (c.handle == MPI_DATATYPE_NULL || type(c.handle)) continue;  // absent, or an alias already listed
    int integers = 0, addresses = 0, datatypes = 0, combiner = 0;
    MPI_Count size = 0, lb = 0, extent = 0;
    // A library built without Fortran may give its Fortran types no size.
    if (PMPI_Type_get_envelope(c.handle, &integers, &addresses, &datatypes, &combiner) != MPI_SUCCESS ||
        combiner != MPI_COMBINER_NAMED || PMPI_Type_size_x(c.handle, &size) != MPI_SUCCESS ||
        PMPI_Type_get_extent_x(c.handle, &lb, &extent) != MPI_SUCCESS || lb != 0 || extent != size)
      continue;
    if (const auto dtype = dtype_of(c, size)) types_.push_back(ServedType{c.handle, *dtype, c.kind});
  }
  for (const ServedType& t : types_) {
    std::size_t i = slot_of(t.handle);
    while (slots_[i]) i = (i + 1) % kSlots;
    slots_[i] = &t;
  }

  const OpName ops[] = {
      {MPI_SUM, "sum"}, {MPI_MAX, "max"},   {MPI_MIN, "min"},   {MPI_PROD, "prod"}, {MPI_BAND, "band"},
      {MPI_BOR, "bor"}, {MPI_BXOR, "bxor"}, {MPI_LAND, "land"}, {MPI_LOR, "lor"},   {MPI_LXOR, ""},
      {MPI_MAXLOC, ""}, {MPI_MINLOC, ""},   {MPI_REPLACE, ""},  {MPI_NO_OP, ""},    {MPI_OP_NULL, ""},
  };
  for (const OpName& o : ops) {
    if (o.name.empty()) {
      predefined_.push_back(PredefinedOp{o.handle, -1});
      continue;
    }
    std::array<std::unique_ptr<const ReduceOp>, 10> by_dtype;
    for (DType t : all_dtypes()) {
      // builtin_op refuses the bitwise operators on floating types, which
      // defined_on never asks for.
      if (is_floating(t) && (o.name == "band" || o.name == "bor" || o.name == "bxor")) continue;
      by_dtype[index_of(t)] = std::make_unique<const ReduceOp>(builtin_op(o.name, t));
    }
    PredefinedOp p{o.handle, static_cast<int>(builtin_.size())};
    for (TypeClass kind :
         {TypeClass::c_integer, TypeClass::fortran_integer, TypeClass::floating, TypeClass::byte, TypeClass::character})
      p.defined_on_kind[static_cast<std::size_t>(kind)] = defined_on(o.name, kind);
    predefined_.push_back(p);
    builtin_.push_back(std::move(by_dtype));
  }
}

std::size_t Mapping::slot_of(MPI_Datatype handle) {
  // Fibonacci hashing: Open MPI's handles are aligned addresses, whose low
  // bits are all zero; the multiplication spreads the others.
  const std::uint64_t h = std::hash<MPI_Datatype>{}(handle);
  return static_cast<std::size_t>((h * 0x9E3779B97F4A7C15ULL) >> (64 - kSlotBits));
}

const ServedType* Mapping::type(MPI_Datatype handle) const {
  for (std::size_t i = slot_of(handle);; i = (i + 1) % kSlots) {
    const ServedType* t = slots_[i];
    if (!t || t->handle == handle) return t;
  }
}

const ReduceOp* Mapping::op(MPI_Op op, const ServedType& type) {
  for (const PredefinedOp& p : predefined_) {
    if (p.handle != op) continue;
    if (p.builtin < 0) return nullptr;
    const auto& reduce_op = builtin_[static_cast<std::size_t>(p.builtin)][index_of(type.dtype)];
    return reduce_op && p.defined_on_kind[static_cast<std::size_t>(type.kind)] ? reduce_op.get() : nullptr;
  }

  // A user operator.
  std::lock_guard<std::mutex> lock(user_mutex_);
  for (const UserOp& u : user_)
    if (u.op == op && u.type == type.handle) return u.reduce_op.get();
  int commute = 0;
  if (PMPI_Op_commutative(op, &commute) != MPI_SUCCESS) return nullptr;  // not an operator: MPI reports it
  const std::size_t element = dtype_size(type.dtype);
  auto apply = [op, datatype = type.handle, element](const void* in, void* inout, std::size_t n) {
    // MPI counts are ints: a longer vector goes in pieces.
    const auto* from = static_cast<const std::byte*>(in);
    auto* to = static_cast<std::byte*>(inout);
    while (n > 0) {
      const std::size_t piece = std::min<std::size_t>(n, INT_MAX);
      check_mpi(PMPI_Reduce_local(from, to, static_cast<int>(piece), datatype, op),
                "MPI_Reduce_local with the application's operator");
      from += piece * element;
      to += piece * element;
      n -= piece;
    }
  };
  user_.push_back(UserOp{op, type.handle,
                         std::make_unique<const ReduceOp>(
                             user_op("MPI_Op_create operator", type.dtype, commute != 0, element, std::move(apply)))});
  return user_.back().reduce_op.get();
}

void Mapping::forget(MPI_Op op) {
  std::lock_guard<std::mutex> lock(user_mutex_);
  std::erase_if(user_, [op](const UserOp& u) { return u.op == op; });
}

}  // namespace copse::mpi
