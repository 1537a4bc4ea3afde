// Node attributes: int, float, string, lists of those, a tensor, a graph (region) or a list of graphs.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "ir/tensor.h"

namespace cuvil {

class Graph;

enum class AttrKind { Int, Float, String, Ints, Floats, Strings, Tensor, Graph, Graphs };
const char* attr_kind_name(AttrKind k);

using GraphPtr = std::shared_ptr<Graph>;

class Attribute {
 public:
  using Storage = std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>,
                               std::vector<std::string>, Tensor, GraphPtr, std::vector<GraphPtr>>;
  Attribute() = default;
  Attribute(int64_t v) : v_(v) {}                                     // NOLINT
  Attribute(int v) : v_(int64_t(v)) {}                                // NOLINT
  Attribute(double v) : v_(v) {}                                      // NOLINT
  Attribute(std::string v) : v_(std::move(v)) {}                      // NOLINT
  Attribute(const char* v) : v_(std::string(v)) {}                    // NOLINT
  Attribute(std::vector<int64_t> v) : v_(std::move(v)) {}             // NOLINT
  Attribute(std::vector<double> v) : v_(std::move(v)) {}              // NOLINT
  Attribute(std::vector<std::string> v) : v_(std::move(v)) {}         // NOLINT
  Attribute(Tensor v) : v_(std::move(v)) {}                           // NOLINT
  Attribute(GraphPtr v) : v_(std::move(v)) {}                         // NOLINT
  Attribute(std::vector<GraphPtr> v) : v_(std::move(v)) {}            // NOLINT

  AttrKind kind() const { return AttrKind(v_.index()); }
  int64_t i() const { return get<int64_t>(); }
  double f() const { return get<double>(); }
  const std::string& s() const { return get<std::string>(); }
  const std::vector<int64_t>& ints() const { return get<std::vector<int64_t>>(); }
  const std::vector<double>& floats() const { return get<std::vector<double>>(); }
  const std::vector<std::string>& strings() const { return get<std::vector<std::string>>(); }
  const Tensor& t() const { return get<Tensor>(); }
  const GraphPtr& g() const { return get<GraphPtr>(); }
  const std::vector<GraphPtr>& graphs() const { return get<std::vector<GraphPtr>>(); }

 private:
  template <class T>
  const T& get() const {
    const T* p = std::get_if<T>(&v_);
    CUVIL_ASSERT(p, "attribute of kind ", attr_kind_name(kind()), " read as another kind");
    return *p;
  }
  Storage v_;
};

// Sorted by name, so printing is deterministic.
using AttrMap = std::map<std::string, Attribute>;

}  // namespace cuvil
