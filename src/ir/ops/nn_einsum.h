// Einsum equation parsing, shared by inference (src/ir/ops/nn.cpp) and the kernel (src/kernels/ref/nn.cpp).
//
// Every dim of every operand gets a label id: letters 'A'-'Z' are 0-25 and 'a'-'z' 26-51 (so sorting ids sorts in
// ASCII order, as numpy's implicit output does), and the dims an ellipsis covers are 52, 53, ... right-aligned
// across operands (they broadcast like numpy).
#pragma once

#include <string>
#include <vector>

#include "ir/op_schema.h"

namespace cuvil::nn {

inline constexpr int kEinsumLetters = 52;

inline char letter_char(int label) { return label < 26 ? char('A' + label) : char('a' + label - 26); }

struct EinsumSpec {
  std::vector<std::vector<int>> inputs;  // per operand, per dim: its label
  std::vector<int> output;               // per output dim: its label
  int num_labels = 0;                    // letters plus ellipsis dims
};

template <class Ctx>
EinsumSpec parse_einsum(const Ctx& c, const std::string& equation, const std::vector<size_t>& ranks) {
  std::string eq;
  for (char ch : equation)
    if (ch != ' ') eq += ch;
  std::string lhs = eq, rhs;
  bool explicit_out = false;
  if (size_t arrow = eq.find("->"); arrow != std::string::npos) {
    lhs = eq.substr(0, arrow);
    rhs = eq.substr(arrow + 2);
    explicit_out = true;
  }
  std::vector<std::string> terms(1);
  for (char ch : lhs) {
    if (ch == ',') terms.emplace_back();
    else terms.back() += ch;
  }
  if (terms.size() != ranks.size())
    c.error("equation '", equation, "' has ", terms.size(), " input terms but the node has ", ranks.size(),
            " inputs");

  auto letter_id = [&](char ch) -> int {
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return 26 + (ch - 'a');
    c.error("equation '", equation, "': unexpected character '", std::string(1, ch), "'");
  };
  // Splits a term into its letters before and after an optional "...".
  struct Term {
    std::vector<int> before, after;
    bool ellipsis = false;
  };
  auto split = [&](const std::string& t) {
    Term r;
    for (size_t i = 0; i < t.size(); ++i) {
      if (t[i] == '.') {
        if (r.ellipsis || t.compare(i, 3, "...") != 0)
          c.error("equation '", equation, "': malformed ellipsis in term '", t, "'");
        r.ellipsis = true;
        i += 2;
        continue;
      }
      (r.ellipsis ? r.after : r.before).push_back(letter_id(t[i]));
    }
    return r;
  };

  std::vector<Term> parsed;
  size_t ell_rank = 0;
  for (size_t k = 0; k < terms.size(); ++k) {
    Term t = split(terms[k]);
    size_t letters = t.before.size() + t.after.size();
    if (t.ellipsis ? ranks[k] < letters : ranks[k] != letters)
      c.error("equation '", equation, "': term '", terms[k], "' does not match input ", k, " of rank ", ranks[k]);
    if (t.ellipsis) ell_rank = std::max(ell_rank, ranks[k] - letters);
    parsed.push_back(std::move(t));
  }

  EinsumSpec spec;
  spec.num_labels = kEinsumLetters + int(ell_rank);
  std::vector<int> count(size_t(spec.num_labels), 0);
  for (size_t k = 0; k < parsed.size(); ++k) {
    const Term& t = parsed[k];
    std::vector<int> labels = t.before;
    size_t e = ranks[k] - t.before.size() - t.after.size();
    for (size_t j = 0; j < e; ++j) labels.push_back(kEinsumLetters + int(ell_rank - e + j));
    labels.insert(labels.end(), t.after.begin(), t.after.end());
    for (int l : labels) ++count[size_t(l)];
    spec.inputs.push_back(std::move(labels));
  }

  std::vector<int> ell_labels;
  for (size_t j = 0; j < ell_rank; ++j) ell_labels.push_back(kEinsumLetters + int(j));
  if (explicit_out) {
    Term t = split(rhs);
    if (!t.ellipsis && ell_rank > 0)
      c.error("equation '", equation, "': the inputs' ellipsis covers ", ell_rank,
              " dims, so the output must contain '...'");
    spec.output = t.before;
    if (t.ellipsis) spec.output.insert(spec.output.end(), ell_labels.begin(), ell_labels.end());
    spec.output.insert(spec.output.end(), t.after.begin(), t.after.end());
    std::vector<bool> seen(size_t(spec.num_labels), false);
    for (int l : spec.output) {
      if (l < kEinsumLetters && count[size_t(l)] == 0)
        c.error("equation '", equation, "': output label '", std::string(1, letter_char(l)),
                "' does not appear in any input");
      if (seen[size_t(l)]) c.error("equation '", equation, "': an output label appears twice");
      seen[size_t(l)] = true;
    }
  } else {
    spec.output = ell_labels;
    for (int l = 0; l < kEinsumLetters; ++l)
      if (count[size_t(l)] == 1) spec.output.push_back(l);
  }
  return spec;
}

}  // namespace cuvil::nn
