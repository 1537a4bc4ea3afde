// RNN, GRU and LSTM in f32 with their default activations (what PyTorch and Keras exports write): the reference
// kernel's recurrence (ref/recurrent.cpp, the oracle), with the gate products as vectorized dot products read
// straight from W and R (no per-call copies; the weights need not be constants), or, for constant weights, as
// column-wise products over W and R packed transposed at prepare, and the gate activations on the unary kernels'
// vectorized loops. A step of silero-vad's LSTM (H = 128) took 184 µs on the reference kernel,
// which converts W and R to vectors on every call and multiplies one scalar at a time.
//
// Left to the reference kernel: other dtypes, non-default activations, LSTM peepholes and input_forget, and
// inputs whose sizes do not match (its messages report them).
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "ir/ops/recurrent_common.h"
#include "kernels/cpu/cpu_util.h"

namespace cuvil::cpu {

namespace {

enum class Cell { Rnn, Gru, Lstm };

// y[r] (+)= W[r, :] . x for r in [0, rows): W row-major with `n` columns. Four rows at a time share the loads
// of x; each row's sum runs over 16 lanes, added pairwise at the end.
CUVIL_CPU_CLONES void matvec(const float* W, const float* x, int64_t rows, int64_t n, float* y, bool accumulate) {
  constexpr int L = 16;
  const int64_t nv = n / L * L;
  int64_t r = 0;
  auto hsum = [](const float* a) {
    float s8[8];
    for (int l = 0; l < 8; ++l) s8[l] = a[l] + a[l + 8];
    float s4[4];
    for (int l = 0; l < 4; ++l) s4[l] = s8[l] + s8[l + 4];
    return (s4[0] + s4[2]) + (s4[1] + s4[3]);
  };
  for (; r + 4 <= rows; r += 4) {
    const float* w0 = W + r * n;
    const float* w1 = w0 + n;
    const float* w2 = w1 + n;
    const float* w3 = w2 + n;
    float a0[L] = {}, a1[L] = {}, a2[L] = {}, a3[L] = {};
    for (int64_t k = 0; k < nv; k += L) {
      for (int l = 0; l < L; ++l) {
        const float xv = x[k + l];
        a0[l] += w0[k + l] * xv;
        a1[l] += w1[k + l] * xv;
        a2[l] += w2[k + l] * xv;
        a3[l] += w3[k + l] * xv;
      }
    }
    float s[4] = {hsum(a0), hsum(a1), hsum(a2), hsum(a3)};
    for (int64_t k = nv; k < n; ++k) {
      s[0] += w0[k] * x[k];
      s[1] += w1[k] * x[k];
      s[2] += w2[k] * x[k];
      s[3] += w3[k] * x[k];
    }
    for (int i = 0; i < 4; ++i) y[r + i] = accumulate ? y[r + i] + s[i] : s[i];
  }
  for (; r < rows; ++r) {
    const float* w = W + r * n;
    float a[L] = {};
    for (int64_t k = 0; k < nv; k += L)
      for (int l = 0; l < L; ++l) a[l] += w[k + l] * x[k + l];
    float s = hsum(a);
    for (int64_t k = nv; k < n; ++k) s += w[k] * x[k];
    y[r] = accumulate ? y[r] + s : s;
  }
}

// y[j] (+)= sum_k WT[k * ld + j] x[k] for j in [0, cols): constant weights packed transposed at prepare, so the
// product runs along contiguous columns with no horizontal sums (four k at a time per pass over y).
CUVIL_CPU_CLONES void matvec_t(const float* WT, int64_t ld, int64_t cols, const float* x, int64_t K, float* y,
                               bool accumulate) {
  if (!accumulate)
    for (int64_t j = 0; j < cols; ++j) y[j] = 0.f;
  int64_t k = 0;
  for (; k + 4 <= K; k += 4) {
    const float x0 = x[k], x1 = x[k + 1], x2 = x[k + 2], x3 = x[k + 3];
    const float *w0 = WT + k * ld, *w1 = w0 + ld, *w2 = w1 + ld, *w3 = w2 + ld;
    for (int64_t j = 0; j < cols; ++j) y[j] += (w0[j] * x0 + w1[j] * x1) + (w2[j] * x2 + w3[j] * x3);
  }
  for (; k < K; ++k) {
    const float xk = x[k];
    const float* w = WT + k * ld;
    for (int64_t j = 0; j < cols; ++j) y[j] += w[j] * xk;
  }
}

// Per direction, [rows, cols] row-major -> [cols, rows] (W: [G H, in] -> [in, G H]).
std::shared_ptr<const std::vector<float>> pack_transposed(const Tensor& t, int64_t nd, int64_t rows, int64_t cols) {
  auto out = std::make_shared<std::vector<float>>(size_t(nd * rows * cols));
  const float* src = t.data<float>();
  for (int64_t d = 0; d < nd; ++d)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        (*out)[size_t(d * rows * cols + c * rows + r)] = src[d * rows * cols + r * cols + c];
  return out;
}

CUVIL_CPU_CLONES void add_to(float* y, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += b[i];
}

CUVIL_CPU_CLONES void clamp(float* y, int64_t n, float lim) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::min(std::max(y[i], -lim), lim);
}

// LSTM's state update from activated gates i, o, f, c (each H long, in that order): c = f c + i g; h = o tanh(c).
CUVIL_CPU_CLONES void lstm_update(const float* gates, float* c, float* h, float* tmp, int64_t H) {
  const float *ig = gates, *og = gates + H, *fg = gates + 2 * H, *cg = gates + 3 * H;
  for (int64_t j = 0; j < H; ++j) c[j] = fg[j] * c[j] + ig[j] * cg[j];
  for (int64_t j = 0; j < H; ++j) tmp[j] = c[j];
  activate_inplace(tmp, H, nn::Activation{nn::Act::Tanh});
  for (int64_t j = 0; j < H; ++j) h[j] = og[j] * tmp[j];
}

// GRU's blend: h = (1 - z) hh + z h.
CUVIL_CPU_CLONES void gru_update(const float* z, const float* hh, float* h, int64_t H) {
  for (int64_t j = 0; j < H; ++j) h[j] = (1.f - z[j]) * hh[j] + z[j] * h[j];
}

CUVIL_CPU_CLONES void mul_into(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}

struct Dims {
  Cell cell;
  int G;
  int64_t nd, seq, batch, in, H;
  bool batch_major, reverse_only, lbr;
  float clip;  // +inf: none
};

// Everything run() reads besides the tensors is decided at prepare.
// WT/RT: W and R packed transposed (constant weights), or null: then read as they are with dot products.
void run_cell(KernelContext& ctx, const Dims& d, const float* WT, const float* RT) {
  const int64_t G = d.G, H = d.H, in = d.in, seq = d.seq, batch = d.batch, nd = d.nd;
  const float* x = ctx.input(0).data<float>();
  const float* W = ctx.input(1).data<float>();
  const float* R = ctx.input(2).data<float>();
  auto opt = [&](size_t i) -> const float* {
    return i < ctx.num_inputs() && ctx.has_input(i) ? ctx.input(i).data<float>() : nullptr;
  };
  const float* B = opt(3);
  const int32_t* lens_p = ctx.num_inputs() > 4 && ctx.has_input(4) ? ctx.input(4).data<int32_t>() : nullptr;
  const float* h0 = opt(5);
  const float* c0 = d.cell == Cell::Lstm ? opt(6) : nullptr;
  for (int64_t b = 0; lens_p && b < batch; ++b)
    if (lens_p[b] < 0 || lens_p[b] > seq)
      ctx.error("sequence_lens[", b, "] = ", lens_p[b], " is outside [0, ", seq, "]");
  float* Y = ctx.num_outputs() > 0 ? ctx.output(0).data<float>() : nullptr;
  float* Yh = ctx.num_outputs() > 1 ? ctx.output(1).data<float>() : nullptr;
  float* Yc = ctx.num_outputs() > 2 ? ctx.output(2).data<float>() : nullptr;

  auto x_at = [&](int64_t t, int64_t b) { return (d.batch_major ? b * seq + t : t * batch + b) * in; };
  auto y_at = [&](int64_t t, int64_t dd, int64_t b) {
    return (d.batch_major ? (b * seq + t) * nd + dd : (t * nd + dd) * batch + b) * H;
  };
  auto state_at = [&](int64_t dd, int64_t b) { return (d.batch_major ? b * nd + dd : dd * batch + b) * H; };

  // Scratch: gx (G H), gh (G H), h, c, tmp (H each).
  thread_local std::vector<float> scratch;
  scratch.resize(size_t(2 * G * H + 4 * H));
  float* gx = scratch.data();
  float* gh = gx + G * H;
  float* h = gh + G * H;
  float* c = h + H;
  float* tmp = c + H;
  float* tmp2 = tmp + H;
  const nn::Activation sigmoid{nn::Act::Sigmoid}, tanh_act{nn::Act::Tanh};
  const bool do_clip = std::isfinite(d.clip);

  for (int64_t dd = 0; dd < nd; ++dd) {
    const bool reverse = d.reverse_only || dd == 1;
    const float* Wd = W + dd * G * H * in;
    const float* Rd = R + dd * G * H * H;
    const float* Wb = B ? B + dd * 2 * G * H : nullptr;
    const float* Rb = B ? Wb + G * H : nullptr;
    const float* WTd = WT ? WT + dd * G * H * in : nullptr;
    const float* RTd = RT ? RT + dd * G * H * H : nullptr;
    // y = W x_t; y (+)= R rows [row0, row0 + rows) times v.
    auto prod_w = [&](const float* xv, float* y) {
      if (WTd) matvec_t(WTd, G * H, G * H, xv, in, y, false);
      else matvec(Wd, xv, G * H, in, y, false);
    };
    auto prod_r = [&](int64_t row0, int64_t rows, const float* v, float* y, bool acc) {
      if (RTd) matvec_t(RTd + row0, G * H, rows, v, H, y, acc);
      else matvec(Rd + row0 * H, v, rows, H, y, acc);
    };
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t len = lens_p ? lens_p[b] : seq;
      for (int64_t j = 0; j < H; ++j) {
        h[j] = h0 ? h0[state_at(dd, b) + j] : 0.f;
        c[j] = c0 ? c0[state_at(dd, b) + j] : 0.f;
      }
      for (int64_t step = 0; step < len; ++step) {
        const int64_t t = reverse ? len - 1 - step : step;
        prod_w(x + x_at(t, b), gx);
        if (Wb) add_to(gx, Wb, G * H);
        if (d.cell == Cell::Lstm) {
          // gx += R h + Rb; sigmoid over i, o, f (contiguous), tanh over c.
          prod_r(0, G * H, h, gh, false);
          if (Rb) add_to(gh, Rb, G * H);
          add_to(gx, gh, G * H);
          if (do_clip) clamp(gx, G * H, d.clip);
          activate_inplace(gx, 3 * H, sigmoid);
          activate_inplace(gx + 3 * H, H, tanh_act);
          lstm_update(gx, c, h, tmp, H);
        } else if (d.cell == Cell::Gru) {
          // z, r from gx + gh over 2H; the hidden gate from gx_h and R_h (r h) or r (R_h h + Rb_h).
          const int64_t rows = d.lbr ? 3 * H : 2 * H;
          prod_r(0, rows, h, gh, false);
          if (Rb) add_to(gh, Rb, rows);
          add_to(gx, gh, 2 * H);
          if (do_clip) clamp(gx, 2 * H, d.clip);
          activate_inplace(gx, 2 * H, sigmoid);
          float* hx = gx + 2 * H;
          if (d.lbr) {
            mul_into(gx + H, gh + 2 * H, tmp, H);
            add_to(hx, tmp, H);
          } else {
            mul_into(gx + H, h, tmp, H);
            prod_r(2 * H, H, tmp, tmp2, false);
            if (Rb) add_to(tmp2, Rb + 2 * H, H);
            add_to(hx, tmp2, H);
          }
          if (do_clip) clamp(hx, H, d.clip);
          activate_inplace(hx, H, tanh_act);
          gru_update(gx, hx, h, H);
        } else {
          prod_r(0, H, h, gx, true);
          if (Rb) add_to(gx, Rb, H);
          if (do_clip) clamp(gx, H, d.clip);
          activate_inplace(gx, H, tanh_act);
          for (int64_t j = 0; j < H; ++j) h[j] = gx[j];
        }
        if (Y)
          for (int64_t j = 0; j < H; ++j) Y[y_at(t, dd, b) + j] = h[j];
      }
      // Steps past the sequence's end are zero; so are the final states of an empty sequence.
      if (Y)
        for (int64_t t = len; t < seq; ++t)
          for (int64_t j = 0; j < H; ++j) Y[y_at(t, dd, b) + j] = 0.f;
      for (int64_t j = 0; j < H; ++j) {
        if (Yh) Yh[state_at(dd, b) + j] = len > 0 ? h[j] : 0.f;
        if (Yc) Yc[state_at(dd, b) + j] = len > 0 ? c[j] : 0.f;
      }
    }
  }
}

bool is_default(const std::vector<recurrent::Activation>& acts, const std::vector<recurrent::ActKind>& want) {
  for (size_t i = 0; i < acts.size(); ++i)
    if (acts[i].kind != want[i % want.size()]) return false;
  return true;
}

int64_t numel(const PrepareInput& p) {
  int64_t n = 1;
  for (int64_t d : p.shape) n *= d;
  return n;
}

}  // namespace

std::unique_ptr<PreparedKernel> prepare_recurrent(const Node& n, const std::vector<PrepareInput>& inputs) {
  using recurrent::ActKind;
  const Cell cell = n.op() == OpKind::LSTM ? Cell::Lstm : n.op() == OpKind::GRU ? Cell::Gru : Cell::Rnn;
  const int G = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 3 : 4;
  auto present = [&](size_t i) { return i < inputs.size() && inputs[i].present; };
  if (!present(0) || !present(1) || !present(2)) return nullptr;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (present(i) && i != 4 && inputs[i].dtype != DType::f32) return nullptr;
  if (present(4) && inputs[4].dtype != DType::i32) return nullptr;
  if (cell == Cell::Lstm && present(7)) return nullptr;  // peepholes
  AttrReader a(n);
  if (cell == Cell::Lstm && a.i("input_forget") != 0) return nullptr;
  auto dir = recurrent::parse_direction(a.s("direction"));
  if (!dir) return nullptr;
  const int64_t nd = recurrent::num_directions(*dir);
  const auto& xs = inputs[0].shape;
  if (xs.size() != 3 || inputs[1].shape.size() != 3 || inputs[2].shape.size() != 3) return nullptr;
  const int64_t layout = a.i("layout");
  if (layout != 0 && layout != 1) return nullptr;
  Dims d{cell, G, nd, xs[layout ? 1 : 0], xs[layout ? 0 : 1], xs[2],
         a.has("hidden_size") ? a.i("hidden_size") : inputs[2].shape[2], layout == 1,
         *dir == recurrent::Direction::Reverse, cell == Cell::Gru && a.i("linear_before_reset") != 0,
         std::numeric_limits<float>::infinity()};
  if (d.H <= 0) return nullptr;
  const double clip = a.has("clip") ? double(a.f("clip")) : std::numeric_limits<double>::infinity();
  if (!(clip > 0)) return nullptr;
  d.clip = float(clip);
  auto acts = recurrent::resolve_activations(
      a, int(nd),
      cell == Cell::Rnn ? std::vector<std::string>{"Tanh"}
      : cell == Cell::Gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                          : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"},
      cell == Cell::Rnn);
  if (!acts.error.empty()) return nullptr;
  if (!is_default(acts.acts, cell == Cell::Rnn ? std::vector<ActKind>{ActKind::Tanh}
                             : cell == Cell::Gru ? std::vector<ActKind>{ActKind::Sigmoid, ActKind::Tanh}
                                                 : std::vector<ActKind>{ActKind::Sigmoid, ActKind::Tanh,
                                                                        ActKind::Tanh}))
    return nullptr;
  // Sizes the reference kernel would refuse stay with it (its messages).
  const int64_t GH = G * d.H;
  if (numel(inputs[1]) != nd * GH * d.in || numel(inputs[2]) != nd * GH * d.H) return nullptr;
  if (present(3) && numel(inputs[3]) != nd * 2 * GH) return nullptr;
  if (present(4) && numel(inputs[4]) != d.batch) return nullptr;
  if (present(5) && numel(inputs[5]) != nd * d.batch * d.H) return nullptr;
  if (cell == Cell::Lstm && present(6) && numel(inputs[6]) != nd * d.batch * d.H) return nullptr;
  const char* name = cell == Cell::Lstm ? "lstm" : cell == Cell::Gru ? "gru" : "rnn";
  std::shared_ptr<const std::vector<float>> WT, RT;
  if (inputs[1].value && inputs[2].value) {
    WT = pack_transposed(*inputs[1].value, nd, GH, d.in);
    RT = pack_transposed(*inputs[2].value, nd, GH, d.H);
  }
  return make_kernel(
      [d, WT, RT](KernelContext& ctx) { run_cell(ctx, d, WT ? WT->data() : nullptr, RT ? RT->data() : nullptr); },
      std::string(name) + (WT ? ":packed" : ""));
}

}  // namespace cuvil::cpu
