// Attention (src/ir/ops/attention.cpp) for f32: per head, two oneDNN matrix products around a masked row Softmax.
//
// The work items are (head, block of query rows); the threads split them in one parallel region, and each item
// runs start to finish on its thread while its data is in L1/L2:
//   q, k, v of the head gathered into dense blocks   (skipped where the operand is dense already; oneDNN 2.6 runs
//                                                     its brgemm kernels only on dense operands)
//   S = scale * q k^T                                (single-threaded oneDNN matmul, k read transposed)
//   E = exp(S + Mask - rowmax), r = 1 / rowsum(E)    (the Mask read through broadcast strides; exp_f, <= 1 ulp;
//                                                     a bool Mask selects S or mask_fill instead)
//   y = r * (E v), scattered into Y's layout          (written in place when Y's block is dense; scaling the dv
//                                                     outputs of a row, not its sk probabilities, saves one of
//                                                     the Softmax's three passes over the scores)
// One fork/join per call, where products over all heads at once (oneDNN's threads inside each) cost seven and
// moved every operand through memory between them. The gathers stand in for the Transpose nodes the pass
// absorbed. Heads are split into row blocks when there are fewer heads than threads, and so that one block's
// scores fit in about 1 MB.
//
// In bf16 (KernelOptions::precision, where oneDNN runs the products on bf16 dot products) the gathers round q, k
// and v to bf16 (nearest even), both products multiply bf16 and accumulate in f32, and the Softmax stays f32 (the
// scores, their max, exp and the sum) except that it writes its probabilities exp(x - max) rounded to bf16 for
// the second product; the 1 / sum scaling stays f32. BERT-base's attention was ~9 % of its bf16 time in f32.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "ir/ops/attention.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/cpu/vec_math_avx512.h"
#include "kernels/workers.h"
#include "kernels/onednn/onednn_common.h"
#include "kernels/onednn/onednn_ops.h"
#include "kernels/ref/indexing.h"
#include "support/half.h"

namespace cuvil::onednn {

namespace {

// The most one thread's scores buffer holds: about a core's L2.
constexpr int64_t kScoresBytes = 1 << 20;

// One strided operand seen in its logical dim order: sizes and strides in elements.
struct View {
  Dims dims, strides;
};

// Logical view of a dense tensor of `shape` through `perm` (logical dim i is stored dim perm[i]).
View permuted_view(const Dims& shape, const std::vector<int64_t>& perm) {
  Dims st = ref::strides_of(shape);
  View v;
  for (int64_t p : perm) v.dims.push_back(shape[size_t(p)]), v.strides.push_back(st[size_t(p)]);
  return v;
}

// The view of y (logical) when Y = Transpose(y, perm): stored dim j is logical dim perm[j].
View output_view(const Dims& y_shape, const std::vector<int64_t>& perm) {
  Dims st = ref::strides_of(y_shape);
  View v{Dims(perm.size()), Dims(perm.size())};
  for (size_t j = 0; j < perm.size(); ++j) {
    v.dims[size_t(perm[j])] = y_shape[j];
    v.strides[size_t(perm[j])] = st[j];
  }
  return v;
}

// Adds the mask row (stride 0: one value for the row), then in place e = exp(x - max); returns 1 / sum(e), the
// factor that makes e the row's softmax. The portable form, for machines without AVX-512.
CUVIL_CPU_CLONES float masked_softmax_row_portable(float* x, int64_t n, const float* mask, int64_t mask_stride) {
  if (mask && mask_stride == 1) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) x[j] += mask[j];
  } else if (mask) {
    float m0 = mask[0];
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) x[j] += m0;
  }
  float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < n; ++j) m = x[j] > m ? x[j] : m;
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) {
    float e = cpu::exp_f(x[j] - m);
    x[j] = e;
    sum += e;
  }
  return 1.f / sum;
}

// The same in two passes of 16 lanes, the last one masked: the mask added while the maximum is taken, then exp
// (cpu::exp_ps16, equal to exp_f lane by lane) and the sum. The loops above ran rows whose length is not a multiple
// of 16 partly through the scalar exp_f. Softmax samples per sample in the products (perf, one thread): ViT's 197
// keys 0.35 -> 0.20, BERT's 128 0.26 -> 0.17, Whisper's 1500 0.20 -> 0.17.
// The first pass: adds the mask (in place) and returns the row's maximum.
__attribute__((target("avx512f"))) float masked_row_max_avx512(float* x, int64_t n, const float* mask,
                                                               int64_t mask_stride) {
  __m512 vmax = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __m512 m0 = _mm512_set1_ps(mask && mask_stride != 1 ? mask[0] : 0.f);
  for (int64_t j = 0; j < n; j += 16) {
    __mmask16 k = n - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - j)) - 1u);
    __m512 v = _mm512_maskz_loadu_ps(k, x + j);
    if (mask) {
      v = _mm512_add_ps(v, mask_stride == 1 ? _mm512_maskz_loadu_ps(k, mask + j) : m0);
      _mm512_mask_storeu_ps(x + j, k, v);
    }
    vmax = _mm512_mask_max_ps(vmax, k, v, vmax);  // (v > max ? v : max: a NaN score is passed over, as above)
  }
  return _mm512_reduce_max_ps(vmax);
}

// The first pass under a bool mask row (stride 1): keeps the scores where it is true and puts `fill` elsewhere
// (in place), and returns the row's maximum. One pass where the select and the maximum took two (BERT's padding
// mask: ~1.5 % of its bf16 time on one thread went to the separate select).
__attribute__((target("avx512f,avx512bw,avx512vl"))) float selected_row_max_avx512(float* x, int64_t n,
                                                                                  const bool* mask, float fill) {
  __m512 vmax = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __m512 vfill = _mm512_set1_ps(fill);
  for (int64_t j = 0; j < n; j += 16) {
    __mmask16 k = n - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - j)) - 1u);
    __m128i keep_bytes = _mm_maskz_loadu_epi8(k, mask + j);
    __mmask16 keep = _mm_test_epi8_mask(keep_bytes, keep_bytes);
    __m512 v = _mm512_mask_blend_ps(keep, vfill, _mm512_maskz_loadu_ps(k, x + j));
    _mm512_mask_storeu_ps(x + j, k, v);
    vmax = _mm512_mask_max_ps(vmax, k, v, vmax);  // (as masked_row_max_avx512)
  }
  return _mm512_reduce_max_ps(vmax);
}

// The second pass: e = exp(x - m) in place; returns 1 / sum(e).
__attribute__((target("avx512f"))) float exp_row_avx512(float* x, int64_t n, float row_max) {
  const __m512 m = _mm512_set1_ps(row_max);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    __mmask16 k = n - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - j)) - 1u);
    __m512 e = cpu::exp_ps16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), m));
    _mm512_mask_storeu_ps(x + j, k, e);
    sum = _mm512_mask_add_ps(sum, k, sum, e);
  }
  return 1.f / _mm512_reduce_add_ps(sum);
}

__attribute__((target("avx512f"))) float masked_softmax_row_avx512(float* x, int64_t n, const float* mask,
                                                                  int64_t mask_stride) {
  return exp_row_avx512(x, n, masked_row_max_avx512(x, n, mask, mask_stride));
}

// f32 -> bf16 on 16 lanes, nearest even (the conversion oneDNN's reorders run; bf16_t's, but for denormals).
__attribute__((target("avx512f,avx512bf16"), always_inline)) inline __m256i cvt_bf16(__m512 x) {
  return __m256i(_mm512_cvtneps_pbh(x));
}

// As exp_row_avx512, but the probabilities exp(x - max) go to `out` rounded to bf16 (the sum is of the f32
// values); x keeps the masked scores.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) float exp_row_bf16(const float* x, int64_t n,
                                                                                  float row_max, uint16_t* out) {
  const __m512 m = _mm512_set1_ps(row_max);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    __mmask16 k = n - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - j)) - 1u);
    __m512 e = cpu::exp_ps16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), m));
    _mm256_mask_storeu_epi16(out + j, k, cvt_bf16(e));
    sum = _mm512_mask_add_ps(sum, k, sum, e);
  }
  return 1.f / _mm512_reduce_add_ps(sum);
}

float masked_softmax_row_bf16(float* x, int64_t n, const float* mask, int64_t mask_stride, uint16_t* out) {
  return exp_row_bf16(x, n, masked_row_max_avx512(x, n, mask, mask_stride), out);
}

// Rows x cols of a strided f32 matrix times `scale` (a power of two: exact) into a dense bf16 one, rounded to
// nearest even.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void gather_bf16(
    const float* strided, int64_t row_stride, int64_t col_stride, uint16_t* dense, int64_t rows, int64_t cols,
    float scale) {
  const __m512 vs = _mm512_set1_ps(scale);
  for (int64_t i = 0; i < rows; ++i) {
    const float* s = strided + i * row_stride;
    uint16_t* d = dense + i * cols;
    if (col_stride != 1) {
      for (int64_t j = 0; j < cols; ++j) d[j] = bf16_t::from_float(s[j * col_stride] * scale);
      continue;
    }
    for (int64_t j = 0; j < cols; j += 16) {
      __mmask16 k = cols - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (cols - j)) - 1u);
      _mm256_mask_storeu_epi16(d + j, k, cvt_bf16(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, s + j), vs)));
    }
  }
}

// Rows x cols of a strided f32 matrix times `scale` (a power of two: exact) into a dense one.
CUVIL_CPU_CLONES void gather_scaled(const float* strided, int64_t row_stride, int64_t col_stride, float* dense,
                                    int64_t rows, int64_t cols, float scale) {
  for (int64_t i = 0; i < rows; ++i) {
    const float* s = strided + i * row_stride;
    float* d = dense + i * cols;
    if (col_stride == 1) {
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) d[j] = s[j] * scale;
    } else {
      for (int64_t j = 0; j < cols; ++j) d[j] = s[j * col_stride] * scale;
    }
  }
}

float masked_softmax_row(float* x, int64_t n, const float* mask, int64_t mask_stride) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512 ? masked_softmax_row_avx512(x, n, mask, mask_stride)
                : masked_softmax_row_portable(x, n, mask, mask_stride);
}

// A bool mask row (stride 0: one value for the row) keeps the scores where it is true and puts `fill` elsewhere
// (Where(Mask, x, fill)), then as masked_softmax_row (masked_softmax_row_bf16 into `bf16_out` where given).
CUVIL_CPU_CLONES float selected_softmax_row(float* x, int64_t n, const bool* mask, int64_t mask_stride, float fill,
                                            uint16_t* bf16_out) {
  static const bool avx512 = __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  if (mask_stride == 1 && (avx512 || bf16_out)) {  // (bf16_out: the kernel checked AVX512-BF16)
    float row_max = selected_row_max_avx512(x, n, mask, fill);
    return bf16_out ? exp_row_bf16(x, n, row_max, bf16_out) : exp_row_avx512(x, n, row_max);
  }
  if (mask_stride == 1) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) x[j] = mask[j] ? x[j] : fill;
  } else if (!mask[0]) {
    std::fill(x, x + n, fill);
  }
  return bf16_out ? masked_softmax_row_bf16(x, n, nullptr, 0, bf16_out) : masked_softmax_row(x, n, nullptr, 0);
}

CUVIL_CPU_CLONES void scale_row(float* x, int64_t n, float factor) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) x[j] *= factor;
}

// Where a head's [rows, cols] matrix of one operand lies: element (i, j) at i * row + j * col.
struct Layout {
  int64_t row, col;
  bool dense(int64_t cols) const { return col == 1 && row == cols; }
};

// Copies rows x cols between a strided matrix and a dense one (to_dense: gather; else scatter).
void move_matrix(float* strided, const Layout& l, float* dense, int64_t rows, int64_t cols, bool to_dense) {
  for (int64_t i = 0; i < rows; ++i) {
    float* s = strided + i * l.row;
    float* d = dense + i * cols;
    if (l.col == 1) std::memcpy(to_dense ? d : s, to_dense ? s : d, size_t(cols) * sizeof(float));
    else if (to_dense) for (int64_t j = 0; j < cols; ++j) d[j] = s[j * l.col];
    else for (int64_t j = 0; j < cols; ++j) s[j * l.col] = d[j];
  }
}

// A single-threaded oneDNN matmul [M, K] x [K, N] -> [M, N] on dense operands (B possibly stored transposed),
// run by several threads at once: each passes its own scratchpad (user-managed), so runs share nothing.
class Product {
 public:
  // bf16: A and B bf16 (f32 accumulation and output). Returns the ISA check's verdict (bf16_dispatch_is_fast).
  bool create(int64_t m, int64_t k, int64_t n, bool b_transposed, float scale, bool bf16, std::string* reason) {
    auto f32 = memory::data_type::f32, in = bf16 ? memory::data_type::bf16 : f32;
    a_ = memory::desc({m, k}, in, Dims{k, 1});
    b_ = memory::desc({k, n}, in, b_transposed ? Dims{1, k} : Dims{n, 1});
    y_ = memory::desc({m, n}, f32, Dims{n, 1});
    dnnl::post_ops po;
    if (scale != 1.f) po.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, scale, 0.f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(po);
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    ScopedThreads one(1);  // the primitive plans its work for the one thread that runs it
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_, b_, y_), attr, cpu_engine());
    if (bf16 && !bf16_dispatch_is_fast(pd.impl_info_str(), reason)) return false;
    name_ = primitive_created(pd);
    prim_ = dnnl::matmul(pd);
    scratch_ = pd.scratchpad_desc();
    return true;
  }
  const std::string& name() const { return name_; }

  // One thread's memory objects for this product (bound per run).
  struct Args {
    std::vector<memory> mems;
    std::vector<float> scratchpad;
    std::vector<dnnl_exec_arg_t> list;
  };
  Args make_args() const {
    Args a;
    const std::pair<int, const memory::desc*> descs[] = {
        {DNNL_ARG_SRC, &a_}, {DNNL_ARG_WEIGHTS, &b_}, {DNNL_ARG_DST, &y_}, {DNNL_ARG_SCRATCHPAD, &scratch_}};
    size_t scratch_bytes = scratch_.get_size();
    for (auto [arg, md] : descs) {
      if (arg == DNNL_ARG_SCRATCHPAD && scratch_bytes == 0) continue;
      a.mems.push_back(memory(*md, cpu_engine(), DNNL_MEMORY_NONE));
      a.list.push_back({arg, a.mems.back().get()});
    }
    if (scratch_bytes) {
      // 64-byte aligned, as oneDNN's own scratchpads are.
      a.scratchpad.resize(scratch_bytes / sizeof(float) + 16);  // (f32 words of any data type's bytes)
      auto at = reinterpret_cast<uintptr_t>(a.scratchpad.data());
      a.mems[3].set_data_handle(reinterpret_cast<void*>((at + 63) & ~uintptr_t(63)));
    }
    return a;
  }

  void run(Args& args, const void* a, const void* b, float* y) const {
    args.mems[0].set_data_handle(const_cast<void*>(a));
    args.mems[1].set_data_handle(const_cast<void*>(b));
    args.mems[2].set_data_handle(y);
    dnnl::error::wrap_c_api(dnnl_primitive_execute(prim_.get(), thread_stream().get(), int(args.list.size()),
                                                   args.list.data()),
                            "could not execute a primitive");
  }

 private:
  dnnl::primitive prim_;
  memory::desc a_, b_, y_, scratch_;
  std::string name_;
};

class AttentionKernel final : public PreparedKernel {
 public:
  // bf16: the products in bf16 (see the top), or false with `reason` set where oneDNN would not run them on
  // bf16 dot products.
  bool prepare(const Node& n, const std::vector<PrepareInput>& in, const Dims& y_shape, bool bf16,
               std::string* reason) {
    if (in[0].dtype != DType::f32) return false;
    if (bf16 && !__builtin_cpu_supports("avx512bf16")) {
      *reason = "attention: no AVX512-BF16 on this machine";
      return false;
    }
    bf16_ = bf16;
    size_t r = in[0].shape.size();
    if (r < 2 || r > 8) return false;
    View q = permuted_view(in[0].shape, attention_perm(AttrReader(n), "perm_q", r));
    View k = permuted_view(in[1].shape, attention_perm(AttrReader(n), "perm_k", r));
    View v = permuted_view(in[2].shape, attention_perm(AttrReader(n), "perm_v", r));
    View y = output_view(y_shape, attention_perm(AttrReader(n), "perm_y", r));
    sq_ = q.dims[r - 2];
    sk_ = k.dims[r - 2];
    d_ = q.dims[r - 1];
    dv_ = v.dims[r - 1];
    if (sq_ == 0 || sk_ == 0 || d_ == 0 || dv_ == 0) return false;
    // Heads: every batch index, walked through the batch dims' strides of each operand.
    batch_ = Dims(q.dims.begin(), q.dims.end() - 2);
    heads_ = 1;
    for (int64_t b : batch_) heads_ *= b;
    for (const View* x : {&q, &k, &v, &y}) {
      batch_strides_.emplace_back(x->strides.begin(), x->strides.end() - 2);
      layouts_.push_back({x->strides[r - 2], x->strides[r - 1]});
    }
    // Mask: strides over the scores' logical dims, 0 where it broadcasts.
    if (in.size() > 3 && in[3].present) {
      Dims scores = batch_;
      scores.push_back(sq_);
      scores.push_back(sk_);
      mask_strides_ = ref::broadcast_strides(in[3].shape, scores);
      has_mask_ = true;
      bool_mask_ = in[3].dtype == DType::boolean;
      if (!bool_mask_ && in[3].dtype != DType::f32) return false;
      fill_ = AttrReader(n).f("mask_fill");
    }
    nan_zero_ = AttrReader(n).i("nan_probs_zero") != 0;
    // Work items: (head, row block). Fewer heads than threads: each head's query rows split between them.
    threads_ = std::max(1, omp_get_max_threads());
    if (2.0 * double(heads_) * double(sq_) * double(sk_) * double(d_ + dv_) < kSingleThreadFlops) threads_ = 1;
    // A row block's scores stay within kScoresBytes (a long sequence's head is split into several blocks).
    int64_t blocks = heads_ >= threads_ ? 1 : std::min<int64_t>(sq_, (threads_ + heads_ - 1) / heads_);
    rows_ = std::min((sq_ + blocks - 1) / blocks, std::max<int64_t>(1, kScoresBytes / (sk_ * int64_t(sizeof(float)))));
    float scale = AttrReader(n).f("scale");
    // A power-of-two scale (1 / sqrt(64), ...) multiplies q as it is gathered: every product and sum scales
    // exactly, so the scores keep their bits, and the first product loses its eltwise post-op (about 1 % of
    // Whisper's attention on one thread).
    int exponent = 0;
    if (scale != 1.f && std::frexp(scale, &exponent) == 0.5f) {
      q_scale_ = scale;
      scale = 1.f;
    }
    if (!scores_.create(rows_, d_, sk_, true, scale, bf16, reason) ||
        !values_.create(rows_, sk_, dv_, false, 1.f, bf16, reason))
      return false;
    if (int64_t last = sq_ % rows_) {
      if (!scores_last_.create(last, d_, sk_, true, scale, bf16, reason) ||
          !values_last_.create(last, sk_, dv_, false, 1.f, bf16, reason))
        return false;
    }
    if (bf16) precision.precision = Precision::bf16;
    name_ = "onednn:attention:" + scores_.name().substr(std::string("onednn:").size());
    for (int t = 0; t < threads_; ++t) {
      Scratch s;
      s.scores.resize(size_t(rows_ * sk_));
      s.inv_sum.resize(size_t(rows_));
      const int64_t rows[4] = {rows_, sk_, sk_, rows_}, cols[4] = {d_, d_, dv_, dv_};
      for (size_t o = 0; o < 4; ++o) {
        if (bf16 && o < 3) s.dense_bf16[o].resize(size_t(rows[o] * cols[o]));  // always converted
        else if (!layouts_[o].dense(cols[o]) || (o == 0 && q_scale_ != 1.f)) s.dense[o].resize(size_t(rows[o] * cols[o]));
      }
      if (bf16) s.probs_bf16.resize(size_t(rows_ * sk_));
      for (const Product* p : {&scores_, &values_}) s.args.push_back(p->make_args());
      if (sq_ % rows_)
        for (const Product* p : {&scores_last_, &values_last_}) s.args.push_back(p->make_args());
      scratch_.push_back(std::move(s));
    }
    return true;
  }

  void run(KernelContext& ctx) override {
    Pointers p{ctx.input(0).data<float>(), ctx.input(1).data<float>(), ctx.input(2).data<float>(),
               has_mask_ && !bool_mask_ ? ctx.input(3).data<float>() : nullptr,
               has_mask_ && bool_mask_ ? ctx.input(3).data<bool>() : nullptr, ctx.output(0).data<float>()};
    int64_t blocks = (sq_ + rows_ - 1) / rows_, items = heads_ * blocks;
    int nt = int(std::min<int64_t>({threads_, std::max(1, omp_get_max_threads()), items}));
    if (nt <= 1 || omp_in_parallel()) {
      run_items(p, 0, items, scratch_[0]);
      return;
    }
#pragma omp parallel num_threads(nt)
    {
      // The team may be smaller than asked (OMP_DYNAMIC, OMP_THREAD_LIMIT): split by the threads that came.
      int64_t team = omp_get_num_threads(), t = omp_get_thread_num();
      run_items(p, items * t / team, items * (t + 1) / team, scratch_[size_t(t)]);
    }
    cpu::note_parallel_end();
  }

  std::string impl_name() const override { return name_; }

 private:
  struct Pointers {
    const float *q, *k, *v, *mask;
    const bool* bool_mask;
    float* y;
  };
  // One thread's buffers: the dense copies (empty where an operand is dense in place), the scores, and its
  // arguments for the products (full row blocks, then the last partial one).
  struct Scratch {
    std::vector<float> dense[4], scores, inv_sum;
    std::vector<uint16_t> dense_bf16[3], probs_bf16;  // bf16: q, k, v rounded, and the probabilities
    std::vector<Product::Args> args;
  };

  // Items [begin, end): item = head * blocks + block. Consecutive items of one head reuse its gathered k and v.
  void run_items(const Pointers& p, int64_t begin, int64_t end, Scratch& s) const {
    int64_t blocks = (sq_ + rows_ - 1) / rows_, gathered_head = -1;
    const void *kc = nullptr, *vc = nullptr;
    for (int64_t item = begin; item < end; ++item) {
      int64_t head = item / blocks, row0 = (item % blocks) * rows_, rows = std::min(rows_, sq_ - row0);
      int64_t off[4] = {0, 0, 0, 0}, m_off = 0;
      for (int64_t rest = head, d = int64_t(batch_.size()) - 1; d >= 0; --d) {
        int64_t i = rest % batch_[size_t(d)];
        rest /= batch_[size_t(d)];
        for (size_t o = 0; o < 4; ++o) off[o] += i * batch_strides_[o][size_t(d)];
        if (has_mask_) m_off += i * mask_strides_[size_t(d)];
      }
      if (head != gathered_head) {
        kc = dense_operand(s, 1, p.k + off[1], sk_, d_);
        vc = dense_operand(s, 2, p.v + off[2], sk_, dv_);
        gathered_head = head;
      }
      const void* qc = dense_operand(s, 0, p.q + off[0] + row0 * layouts_[0].row, rows, d_);
      bool last = rows != rows_;
      Product::Args& sa = s.args[last ? 2 : 0];
      Product::Args& va = s.args[last ? 3 : 1];
      (last ? scores_last_ : scores_).run(sa, qc, kc, s.scores.data());
      size_t r = mask_strides_.size();
      for (int64_t i = 0; i < rows; ++i) {
        float* x = s.scores.data() + i * sk_;
        uint16_t* xb = bf16_ ? s.probs_bf16.data() + i * sk_ : nullptr;
        if (p.bool_mask) {
          s.inv_sum[size_t(i)] = selected_softmax_row(
              x, sk_, p.bool_mask + m_off + (row0 + i) * mask_strides_[r - 2], mask_strides_[r - 1], fill_, xb);
          continue;
        }
        const float* m = p.mask ? p.mask + m_off + (row0 + i) * mask_strides_[r - 2] : nullptr;
        int64_t ms = p.mask ? mask_strides_[r - 1] : 0;
        s.inv_sum[size_t(i)] = xb ? masked_softmax_row_bf16(x, sk_, m, ms, xb) : masked_softmax_row(x, sk_, m, ms);
      }
      float* yc = p.y + off[3] + row0 * layouts_[3].row;
      bool y_dense = s.dense[3].empty();
      float* yd = y_dense ? yc : s.dense[3].data();  // rows of dv values either way
      const void* probs = bf16_ ? static_cast<const void*>(s.probs_bf16.data()) : s.scores.data();
      (last ? values_last_ : values_).run(va, probs, vc, yd);
      for (int64_t i = 0; i < rows; ++i) {
        float inv = s.inv_sum[size_t(i)];
        // A NaN 1 / sum: the row's probabilities are all NaN (nan_probs_zero makes them 0, so y's row is 0).
        if (nan_zero_ && std::isnan(inv)) std::fill(yd + i * dv_, yd + (i + 1) * dv_, 0.f);
        else scale_row(yd + i * dv_, dv_, inv);
      }
      if (!y_dense) move_matrix(yc, layouts_[3], s.dense[3].data(), rows, dv_, false);
    }
  }

  // Operand o's rows x cols matrix at x, dense: x itself, or gathered into the thread's buffer (in bf16: always
  // gathered, rounded).
  const void* dense_operand(Scratch& s, size_t o, const float* x, int64_t rows, int64_t cols) const {
    float scale = o == 0 ? q_scale_ : 1.f;
    if (bf16_) {
      gather_bf16(x, layouts_[o].row, layouts_[o].col, s.dense_bf16[o].data(), rows, cols, scale);
      return s.dense_bf16[o].data();
    }
    if (s.dense[o].empty()) return x;
    if (scale != 1.f) {
      gather_scaled(x, layouts_[o].row, layouts_[o].col, s.dense[o].data(), rows, cols, scale);
      return s.dense[o].data();
    }
    move_matrix(const_cast<float*>(x), layouts_[o], s.dense[o].data(), rows, cols, true);
    return s.dense[o].data();
  }

  int64_t sq_ = 0, sk_ = 0, d_ = 0, dv_ = 0, heads_ = 1, rows_ = 1;
  int threads_ = 1;
  Dims batch_;                         // the batch dims ("heads" counts all of them)
  std::vector<Dims> batch_strides_;    // per operand (q, k, v, y)
  std::vector<Layout> layouts_;        // per operand: its [rows, cols] matrix strides
  Dims mask_strides_;                  // over the scores' dims; empty without a mask
  bool has_mask_ = false;
  bool bool_mask_ = false;             // a bool mask selects (Where(Mask, score, fill_)); a float one is added
  bool nan_zero_ = false;              // nan_probs_zero: a row whose probabilities are NaN gives 0
  bool bf16_ = false;                  // the products in bf16 (q, k, v and the probabilities rounded)
  float q_scale_ = 1.f;                // a power-of-two scale, applied to q as it is gathered
  float fill_ = 0;
  Product scores_, values_, scores_last_, values_last_;  // full row blocks, and a last partial one
  std::vector<Scratch> scratch_;       // per thread
  std::string name_;
};

}  // namespace

std::unique_ptr<PreparedKernel> prepare_attention(const Node& n, const std::vector<PrepareInput>& inputs,
                                                  const Dims& y) {
  auto k = std::make_unique<AttentionKernel>();
  std::string unused;
  if (!k->prepare(n, inputs, y, false, &unused)) return nullptr;
  return k;
}

std::unique_ptr<PreparedKernel> prepare_attention_bf16(const Node& n, const std::vector<PrepareInput>& inputs,
                                                       const Dims& y, std::string* reason) {
  auto k = std::make_unique<AttentionKernel>();
  if (!k->prepare(n, inputs, y, true, reason)) {
    if (reason->empty()) *reason = "attention: no bf16 kernel for these inputs";
    return nullptr;
  }
  return k;
}

}  // namespace cuvil::onednn
