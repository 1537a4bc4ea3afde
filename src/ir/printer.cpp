#include <charconv>
#include <cmath>
#include <sstream>

#include "ir/text_format.h"
#include "ir/verifier.h"

namespace cuvil {

namespace {

bool is_plain_name(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return false;
  return true;
}

std::string quoted(const std::string& s) {
  std::string r = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      r += '\\';
      r += char(c);
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      r += buf;
    } else {
      r += char(c);
    }
  }
  return r + "\"";
}

std::string value_ref(const Value* v) { return v ? "%" + (is_plain_name(v->name()) ? v->name() : quoted(v->name())) : "none"; }

template <class F>
std::string shortest(F x) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

// A float attribute always reads back as a float: "1.0", not "1".
std::string float_literal(double x) {
  std::string s = shortest(x);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // 'n' covers inf and nan
  return s;
}

std::string hex_bytes(const Tensor& t) {
  static const char* digits = "0123456789abcdef";
  std::string s = "0x";
  auto* p = static_cast<const uint8_t*>(t.raw());
  s.reserve(2 + 2 * t.nbytes());
  for (size_t i = 0; i < t.nbytes(); ++i) {
    s += digits[p[i] >> 4];
    s += digits[p[i] & 15];
  }
  return s;
}

bool inline_printable(const Tensor& t) {
  if (t.dtype() == DType::str) return true;  // text, not bytes: always quoted, never external
  if (t.numel() > kMaxInlineElements) return false;
  if (is_low_precision(t.dtype())) return false;  // codes, not values: printed as their bytes
  if (is_float(t.dtype()))
    for (int64_t i = 0; i < t.numel(); ++i)
      if (std::isnan(t.get_f64(i))) return false;  // NaN payloads only survive as bytes
  return true;
}

std::string tensor_data(const Tensor& t, const PrintOptions& o) {
  if (!inline_printable(t)) {
    if (o.external) return "external(" + std::to_string(o.external(t)) + ")";
    if (o.elide_large_constants) return "<elided " + std::to_string(t.nbytes()) + " bytes>";
    return hex_bytes(t);
  }
  std::string s = "[";
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (i) s += ", ";
    if (t.dtype() == DType::str) {
      s += quoted(t.str(i));
      continue;
    }
    visit_dtype(t.dtype(), [&]<class T>() {
      T v = static_cast<const T*>(t.raw())[i];
      if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) s += shortest(v);
      else if constexpr (is_float_v<T>) s += shortest(float(v));
      else if constexpr (std::is_same_v<T, bool>) s += v ? "1" : "0";
      else s += std::to_string(v);
    });
  }
  return s + "]";
}

class Printer {
 public:
  explicit Printer(const PrintOptions& o) : opts_(o) {}

  void graph(const Graph& g, int indent) {
    os_ << "graph @" << (is_plain_name(g.name()) ? g.name() : quoted(g.name())) << "(";
    for (size_t i = 0; i < g.inputs().size(); ++i) {
      Value* v = g.inputs()[i];
      os_ << (i ? ", " : "") << value_ref(v) << ": " << v->type().str();
    }
    os_ << ") {\n";
    std::string pad(size_t(indent + 2), ' ');
    for (Value* c : g.constants())
      os_ << pad << value_ref(c) << ": " << c->type().str() << " = constant " << tensor_data(c->constant(), opts_)
          << "\n";
    for (auto& n : g.nodes()) node(*n, indent + 2);
    os_ << pad << "return";
    for (size_t i = 0; i < g.outputs().size(); ++i) os_ << (i ? ", " : " ") << value_ref(g.outputs()[i]);
    os_ << "\n" << std::string(size_t(indent), ' ') << "}";
  }

  std::string str() const { return os_.str(); }

 private:
  void node(const Node& n, int indent) {
    os_ << std::string(size_t(indent), ' ');
    for (size_t i = 0; i < n.num_outputs(); ++i)
      os_ << (i ? ", " : "") << value_ref(n.output(i)) << ": " << n.output(i)->type().str();
    if (n.num_outputs()) os_ << " = ";
    os_ << n.op_name() << "(";
    for (size_t i = 0; i < n.num_inputs(); ++i) os_ << (i ? ", " : "") << value_ref(n.input(i));
    os_ << ")";
    if (!n.attrs().empty()) {
      // Regions print recursively, one level of recursion per level of nesting: bounded (verifier.h).
      bool regions = !n.regions().empty();
      if (regions) check_region_depth(n, ++depth_);
      os_ << " {";
      bool first = true;
      for (auto& [name, a] : n.attrs()) {
        os_ << (first ? "" : ", ") << name << " = ";
        attr(a, indent);
        first = false;
      }
      os_ << "}";
      depth_ -= regions;
    }
    const Location& l = n.loc();
    if (!l.empty()) {
      os_ << " loc(";
      if (!l.file.empty()) os_ << quoted(l.file) << ":" << l.line << (l.name.empty() ? "" : " ");
      if (!l.name.empty()) os_ << quoted(l.name);
      if (!l.stack.empty()) os_ << " via " << quoted(l.stack);
      os_ << ")";
    }
    os_ << "\n";
  }

  void attr(const Attribute& a, int indent) {
    switch (a.kind()) {
      case AttrKind::Int: os_ << a.i(); break;
      case AttrKind::Float: os_ << float_literal(a.f()); break;
      case AttrKind::String: os_ << quoted(a.s()); break;
      case AttrKind::Ints: list(a.ints(), [&](int64_t v) { os_ << v; }); break;
      case AttrKind::Floats: list(a.floats(), [&](double v) { os_ << float_literal(v); }); break;
      case AttrKind::Strings: list(a.strings(), [&](const std::string& v) { os_ << quoted(v); }); break;
      case AttrKind::Tensor: os_ << "tensor<" << a.t().type_str() << "> " << tensor_data(a.t(), opts_); break;
      case AttrKind::Graph: graph(*a.g(), indent); break;
      case AttrKind::Graphs: list(a.graphs(), [&](const GraphPtr& g) { graph(*g, indent); }); break;
    }
  }

  template <class V, class F>
  void list(const V& v, F each) {
    os_ << "[";
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) os_ << ", ";
      each(v[i]);
    }
    os_ << "]";
  }

  const PrintOptions& opts_;
  std::ostringstream os_;
  int depth_ = 0;  // regions being printed around the current node
};

}  // namespace

std::string print_graph(const Graph& g, const PrintOptions& opts) {
  Printer p(opts);
  p.graph(g, 0);
  return p.str() + "\n";
}

}  // namespace cuvil
