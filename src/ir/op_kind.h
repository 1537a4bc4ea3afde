// OpKind: the enum generated from the op table (ops.def), with names and a lookup by name.
#pragma once

#include <optional>
#include <string_view>

namespace cuvil {

enum class OpKind : uint16_t {
#define CUVIL_OP(name, family) name,
#include "ir/ops.def"
#undef CUVIL_OP
};

inline constexpr int kNumOps = 0
#define CUVIL_OP(name, family) +1
#include "ir/ops.def"
#undef CUVIL_OP
    ;

std::string_view op_name(OpKind k);
std::string_view op_family(OpKind k);
std::optional<OpKind> op_from_name(std::string_view name);

}  // namespace cuvil
