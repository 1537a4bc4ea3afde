#include <charconv>
#include <set>
#include <cstring>

#include "ir/op_schema.h"
#include "ir/text_format.h"
#include "ir/verifier.h"

namespace cuvil {

namespace {

class Parser {
 public:
  Parser(const std::string& s, const ParseOptions& o) : s_(s), opts_(o) {}

  std::shared_ptr<Graph> top() {
    auto g = graph(nullptr);
    ws();
    if (i_ != s_.size()) error("unexpected text after the graph");
    std::set<std::string> seen;
    check_unique_names(*g, seen);
    return g;
  }

 private:
  // Value names are unique across a graph and all its regions (SSA over scopes), whatever order the text
  // defines them in: the printer lists constants first, so a text that only avoided a clash by its order would not
  // survive a round trip.
  static void check_unique_names(const Graph& g, std::set<std::string>& seen) {
    auto add = [&](const Value* v) {
      if (!seen.insert(v->name()).second) fail("IR text: value %", v->name(), " is defined more than once");
    };
    for (Value* v : g.inputs()) add(v);
    for (Value* v : g.constants()) add(v);
    for (auto& n : g.nodes()) {
      for (Graph* r : n->regions()) check_unique_names(*r, seen);
      for (Value* v : n->outputs()) add(v);
    }
  }

  // ---- lexing helpers
  void ws() {
    for (;;) {
      while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
      if (i_ + 1 < s_.size() && s_[i_] == '/' && s_[i_ + 1] == '/') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
        continue;
      }
      return;
    }
  }
  [[noreturn]] void error(const std::string& msg) const {
    size_t line = 1, col = 1;
    for (size_t k = 0; k < i_ && k < s_.size(); ++k) {
      if (s_[k] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    fail("IR text ", line, ":", col, ": ", msg);
  }
  char peek() {
    ws();
    return i_ < s_.size() ? s_[i_] : '\0';
  }
  bool eat(char c) {
    if (peek() == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) error(std::string("expected '") + c + "'");
  }
  bool is_ident_char(char c) const { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }
  std::string ident() {
    ws();
    size_t j = i_;
    while (j < s_.size() && is_ident_char(s_[j])) ++j;
    if (j == i_) error("expected a name");
    std::string r = s_.substr(i_, j - i_);
    i_ = j;
    return r;
  }
  bool at_keyword(const char* kw) {
    ws();
    size_t n = std::strlen(kw);
    return s_.compare(i_, n, kw) == 0 && (i_ + n == s_.size() || !is_ident_char(s_[i_ + n]));
  }
  bool eat_keyword(const char* kw) {
    if (!at_keyword(kw)) return false;
    i_ += std::strlen(kw);
    return true;
  }
  std::string string_lit() {
    if (peek() != '"') error("expected a string");
    ++i_;
    std::string r;
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (c == '\\') {
        if (i_ >= s_.size()) break;
        char e = s_[i_++];
        if (e == 'x') {
          if (i_ + 2 > s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[i_])) ||
              !std::isxdigit(static_cast<unsigned char>(s_[i_ + 1])))
            error("bad \\x escape");
          r += char(std::stoi(s_.substr(i_, 2), nullptr, 16));
          i_ += 2;
        } else {
          r += e;
        }
      } else {
        r += c;
      }
    }
    if (i_ >= s_.size()) error("unterminated string");
    ++i_;
    return r;
  }
  std::string name_after(char sigil) {
    expect(sigil);
    if (i_ < s_.size() && s_[i_] == '"') return string_lit();
    return ident();
  }
  // A numeric token: optional sign, digits, '.', exponent, or inf / nan.
  std::string number_token() {
    ws();
    size_t j = i_;
    if (j < s_.size() && (s_[j] == '-' || s_[j] == '+')) ++j;
    if (s_.compare(j, 3, "inf") == 0 || s_.compare(j, 3, "nan") == 0) {
      j += 3;
    } else {
      while (j < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[j])) || s_[j] == '.' || s_[j] == 'e' ||
                               s_[j] == 'E' || ((s_[j] == '-' || s_[j] == '+') && (s_[j - 1] == 'e' || s_[j - 1] == 'E'))))
        ++j;
    }
    if (j == i_) error("expected a number");
    std::string r = s_.substr(i_, j - i_);
    i_ = j;
    return r;
  }
  static bool looks_float(const std::string& t) { return t.find_first_of(".eEn") != std::string::npos; }
  template <class T>
  T parse_num(const std::string& t) {
    T v{};
    const char* b = t.data();
    if (*b == '+') ++b;
    auto r = std::from_chars(b, t.data() + t.size(), v);
    if (r.ec != std::errc() || r.ptr != t.data() + t.size()) error("bad number '" + t + "'");
    return v;
  }

  // ---- grammar
  TensorType type() {
    std::string dt = ident();
    auto d = dtype_from_name(dt);
    if (!d) error("unknown dtype '" + dt + "'");
    expect('[');
    if (eat('*')) {
      expect(']');
      return {*d, Shape::unknown_rank()};
    }
    std::vector<Dim> dims;
    // Dims are expressions; split on top-level commas.
    ws();
    if (eat(']')) return {*d, Shape(dims)};
    int depth = 0;
    size_t start = i_;
    for (; i_ < s_.size(); ++i_) {
      char c = s_[i_];
      if (c == '(') ++depth;
      else if (c == ')') --depth;
      else if (depth == 0 && (c == ',' || c == ']')) {
        dims.push_back(dim(s_.substr(start, i_ - start)));
        start = i_ + 1;
        if (c == ']') {
          ++i_;
          return {*d, Shape(dims)};
        }
      }
    }
    error("unterminated shape");
  }
  Dim dim(const std::string& text) {
    try {
      return Dim::parse(text);
    } catch (const Error& e) {
      error(e.what());
    }
  }

  // Strings always print inline, quoted (never hex bytes or external data: their elements are pointers).
  Tensor string_data(const TensorType& t, const std::vector<int64_t>& dims, int64_t numel) {
    if (numel > int64_t(s_.size() - i_)) error("constant data too short for " + t.str());
    std::vector<std::string> text;
    expect('[');
    if (!eat(']')) {
      do {
        if (int64_t(text.size()) >= numel) error("too many values for " + t.str());
        ws();
        text.push_back(string_lit());
      } while (eat(','));
      expect(']');
    }
    if (int64_t(text.size()) != numel) error("expected " + std::to_string(numel) + " values for " + t.str());
    return Tensor::strings(std::move(text), dims);
  }

  Tensor tensor_data(const TensorType& t) {
    if (!t.shape.is_static()) error("a constant needs a static shape, got " + t.str());
    std::vector<int64_t> dims = t.shape.static_dims();
    int64_t numel = 1;
    for (int64_t d : dims)
      if (d < 0 || __builtin_mul_overflow(numel, d, &numel)) error("bad constant shape " + t.str());
    ws();
    if (t.dtype == DType::str) return string_data(t, dims, numel);
    if (s_.compare(i_, 9, "external(") == 0) {
      if (!opts_.external) error("external constant data outside an artifact");
      i_ += 9;
      int64_t index = parse_num<int64_t>(number_token());
      expect(')');
      Tensor ext;
      try {
        ext = opts_.external(index, t.dtype, dims);
      } catch (const Error& e) {
        error(e.what());
      }
      if (ext.dtype() != t.dtype || ext.shape() != dims) error("external constant " + std::to_string(index) + " is not " + t.str());
      return ext;
    }
    // The text must hold the data (two hex digits a byte, or at least one character a value): check before
    // allocating, so a tiny file cannot ask for gigabytes.
    ws();
    size_t left = s_.size() - i_;
    if (numel > int64_t(left) || (s_.compare(i_, 2, "0x") == 0 && numel * int64_t(dtype_size(t.dtype)) * 2 > int64_t(left)))
      error("constant data too short for " + t.str());
    Tensor out = Tensor::zeros(t.dtype, dims);
    if (s_.compare(i_, 2, "0x") == 0) {
      i_ += 2;
      size_t n = out.nbytes();
      if (i_ + 2 * n > s_.size()) error("hex data too short");
      auto* p = static_cast<uint8_t*>(out.raw());
      for (size_t k = 0; k < n; ++k) {
        auto hexval = [&](char c) -> int {
          if (c >= '0' && c <= '9') return c - '0';
          if (c >= 'a' && c <= 'f') return c - 'a' + 10;
          if (c >= 'A' && c <= 'F') return c - 'A' + 10;
          error("bad hex digit");
        };
        p[k] = uint8_t(hexval(s_[i_]) * 16 + hexval(s_[i_ + 1]));
        i_ += 2;
      }
      if (i_ < s_.size() && std::isxdigit(static_cast<unsigned char>(s_[i_]))) error("hex data too long for " + t.str());
      return out;
    }
    if (peek() == '<') error("an elided constant cannot be parsed (print without eliding)");
    expect('[');
    int64_t k = 0;
    if (!eat(']')) {
      do {
        if (k >= out.numel()) error("too many values for " + t.str());
        std::string tok = number_token();
        visit_dtype(t.dtype, [&]<class T>() {
          T* p = static_cast<T*>(out.raw());
          if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) p[k] = parse_num<T>(tok);
          else if constexpr (is_float_v<T>) p[k] = T(parse_num<float>(tok));
          else if constexpr (std::is_same_v<T, bool>) p[k] = parse_num<int>(tok) != 0;
          else p[k] = parse_num<T>(tok);
        });
        ++k;
      } while (eat(','));
      expect(']');
    }
    if (k != out.numel()) error("expected " + std::to_string(out.numel()) + " values for " + t.str());
    return out;
  }

  Value* value_use(Graph& g) {
    if (eat_keyword("none")) return nullptr;
    std::string n = name_after('%');
    Value* v = g.lookup(n);
    if (!v) error("unknown value %" + n);
    return v;
  }

  std::shared_ptr<Graph> graph(Graph* parent) {
    if (!eat_keyword("graph")) error("expected 'graph'");
    // Each level of regions is a level of recursion here: bounded as verify and infer_shapes bound it (one level
    // more for a FusedKernel's body, which they check).
    int depth = 0;
    for (const Graph* p = parent; p; p = p->parent()) ++depth;
    if (depth > kMaxRegionDepth + 1)
      error("regions nest " + std::to_string(depth) + " levels deep here, more than the limit of " +
            std::to_string(kMaxRegionDepth));
    auto g = std::make_shared<Graph>(name_after('@'));
    g->set_parent(parent);
    expect('(');
    if (!eat(')')) {
      do {
        std::string n = name_after('%');
        expect(':');
        if (g->lookup(n)) error("redefinition of %" + n);
        g->add_input(n, type());
      } while (eat(','));
      expect(')');
    }
    expect('{');
    for (;;) {
      if (eat_keyword("return")) break;
      statement(*g);
    }
    std::vector<Value*> outs;
    if (peek() != '}') {
      do {
        Value* v = value_use(*g);
        if (!v) error("a graph cannot return none");
        outs.push_back(v);
      } while (eat(','));
    }
    expect('}');
    g->set_outputs(outs);
    return g;
  }

  void statement(Graph& g) {
    std::vector<std::pair<std::string, TensorType>> outs;
    if (peek() == '%') {  // (a node without outputs, such as Assert, starts with its op)
      do {
        std::string n = name_after('%');
        if (g.lookup(n)) error("redefinition of %" + n);
        expect(':');
        outs.push_back({n, type()});
      } while (eat(','));
      expect('=');
    }
    if (outs.size() == 0 && at_keyword("constant")) error("a constant defines one value");
    if (eat_keyword("constant")) {
      if (outs.size() != 1) error("a constant defines one value");
      g.add_constant(outs[0].first, tensor_data(outs[0].second));
      return;
    }
    std::string op = ident();
    auto kind = op_from_name(op);
    if (!kind) error("unknown op '" + op + "'");
    expect('(');
    std::vector<Value*> ins;
    if (!eat(')')) {
      do ins.push_back(value_use(g));
      while (eat(','));
      expect(')');
    }
    AttrMap attrs;
    if (eat('{')) {
      do {
        std::string an = ident();
        expect('=');
        const AttrSpec* spec = op_schema(*kind).find_attr(an);
        attrs[an] = attribute(g, spec ? std::optional<AttrKind>(spec->kind) : std::nullopt);
      } while (eat(','));
      expect('}');
    }
    Location loc;
    if (eat_keyword("loc")) {
      expect('(');
      if (peek() == '"') {
        std::string first = string_lit();
        if (eat(':')) {
          loc.file = first;
          loc.line = parse_num<int>(number_token());
          if (peek() == '"') loc.name = string_lit();
        } else {
          loc.name = first;
        }
        if (eat_keyword("via")) loc.stack = string_lit();
      }
      expect(')');
    }
    std::vector<std::string> names;
    for (auto& o : outs) names.push_back(o.first);
    Node* n = g.add_node(*kind, ins, names, std::move(attrs), loc);
    for (size_t k = 0; k < outs.size(); ++k) n->output(k)->set_type(outs[k].second);
  }

  Attribute attribute(Graph& g, std::optional<AttrKind> want) {
    char c = peek();
    if (c == '"') return Attribute(string_lit());
    if (at_keyword("graph")) return Attribute(graph(&g));
    if (eat_keyword("tensor")) {
      expect('<');
      TensorType t = type();
      expect('>');
      return Attribute(tensor_data(t));
    }
    if (c == '[') {
      ++i_;
      if (peek() == ']') {
        ++i_;
        if (!want) error("empty list for an attribute the op does not declare");
        switch (*want) {
          case AttrKind::Floats: return Attribute(std::vector<double>{});
          case AttrKind::Strings: return Attribute(std::vector<std::string>{});
          case AttrKind::Graphs: return Attribute(std::vector<GraphPtr>{});
          default: return Attribute(std::vector<int64_t>{});
        }
      }
      if (peek() == '"') {
        std::vector<std::string> v;
        do v.push_back(string_lit());
        while (eat(','));
        expect(']');
        return Attribute(v);
      }
      if (at_keyword("graph")) {
        std::vector<GraphPtr> v;
        do v.push_back(graph(&g));
        while (eat(','));
        expect(']');
        return Attribute(v);
      }
      std::vector<std::string> toks;
      do toks.push_back(number_token());
      while (eat(','));
      expect(']');
      bool floats = want ? *want == AttrKind::Floats : false;
      for (auto& t : toks) floats |= looks_float(t);
      if (floats) {
        std::vector<double> v;
        for (auto& t : toks) v.push_back(parse_num<double>(t));
        return Attribute(v);
      }
      std::vector<int64_t> v;
      for (auto& t : toks) v.push_back(parse_num<int64_t>(t));
      return Attribute(v);
    }
    std::string t = number_token();
    if (looks_float(t) || (want && *want == AttrKind::Float)) return Attribute(parse_num<double>(t));
    return Attribute(parse_num<int64_t>(t));
  }

  const std::string& s_;
  const ParseOptions& opts_;
  size_t i_ = 0;
};

}  // namespace

std::shared_ptr<Graph> parse_graph(const std::string& text, const ParseOptions& opts) {
  return Parser(text, opts).top();
}

}  // namespace cuvil
