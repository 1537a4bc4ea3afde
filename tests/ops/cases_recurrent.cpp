// Cases of the recurrent and resampling family (src/ir/ops/recurrent.cpp): RNN, GRU and LSTM in each direction,
// with biases, sequence lengths and initial states; Resize in each mode over scales and sizes.
#include "harness.h"

namespace cuvil::optest {
namespace {

const Tol kRecurrent{1e-5, 1e-6};

void rnn_cases(Cases& cs) {
  const int64_t seq = 5, batch = 3, in = 4, hidden = 6;
  struct R {
    OpKind op;
    int64_t gates;
    size_t outputs;
  };
  for (const R& r : {R{OpKind::RNN, 1, 2}, R{OpKind::GRU, 3, 2}, R{OpKind::LSTM, 4, 3}})
    for (const char* dir : {"forward", "reverse", "bidirectional"}) {
      int64_t dirs = std::string(dir) == "bidirectional" ? 2 : 1;
      cs.add(r.op, dir)
          .in(f32({seq, batch, in}))
          .in(f32({dirs, r.gates * hidden, in}, -0.5, 0.5).cst())
          .in(f32({dirs, r.gates * hidden, hidden}, -0.5, 0.5).cst())
          .in(f32({dirs, 2 * r.gates * hidden}, -0.5, 0.5).cst())
          .attr("hidden_size", hidden)
          .attr("direction", dir)
          .outs(r.outputs)
          .tol(kRecurrent);
      cs.add(r.op, std::string(dir) + ", lengths and initial state")
          .in(f32({seq, batch, in}))
          .in(f32({dirs, r.gates * hidden, in}, -0.5, 0.5))
          .in(f32({dirs, r.gates * hidden, hidden}, -0.5, 0.5))
          .in(none())
          .in(val(vec<int32_t>({5, 2, 0})))
          .in(f32({dirs, batch, hidden}))
          .attr("hidden_size", hidden)
          .attr("direction", dir)
          .outs(r.outputs)
          .tol(kRecurrent);
    }
  cs.add(OpKind::GRU, "linear_before_reset").in(f32({4, 2, 3})).in(f32({1, 15, 3}, -0.5, 0.5)).in(f32({1, 15, 5}, -0.5, 0.5))
      .in(f32({1, 30}, -0.5, 0.5)).attr("hidden_size", int64_t(5)).attr("linear_before_reset", int64_t(1)).outs(2).tol(kRecurrent);
  cs.add(OpKind::LSTM, "peepholes, layout 1").in(f32({2, 4, 3})).in(f32({1, 20, 3}, -0.5, 0.5)).in(f32({1, 20, 5}, -0.5, 0.5))
      .in(none()).in(none()).in(none()).in(none()).in(f32({1, 15}, -0.5, 0.5))
      .attr("hidden_size", int64_t(5)).attr("layout", int64_t(1)).outs(3).tol(kRecurrent);
  // Sizes for the CPU kernel's vector loops (src/kernels/cpu/recurrent.cpp): dot products over 16 lanes with
  // a tail (37, 21), gate rows not a multiple of the four it takes at a time, both layouts, clipping.
  for (const R& r : {R{OpKind::RNN, 1, 2}, R{OpKind::GRU, 3, 2}, R{OpKind::LSTM, 4, 3}})
    for (int64_t layout : {0, 1}) {
      const int64_t s = 3, b = 2, i = 37, h = 21;
      // Layout 0 with constant weights (packed at prepare), layout 1 with weights read as they come.
      auto weights = [&](Ints shape) { return layout ? f32(shape, -0.3, 0.3) : f32(shape, -0.3, 0.3).cst(); };
      auto shape = [&](int64_t outer, int64_t inner) { return layout ? Ints{inner, outer, 0} : Ints{outer, inner, 0}; };
      Ints xs = shape(s, b), hs = layout ? Ints{b, 2, h} : Ints{2, b, h};
      xs[2] = i;
      auto& c = cs.add(r.op, "bidirectional, odd wide sizes, layout " + std::to_string(layout))
                    .in(f32(xs))
                    .in(weights({2, r.gates * h, i}))
                    .in(weights({2, r.gates * h, h}))
                    .in(f32({2, 2 * r.gates * h}, -0.5, 0.5))
                    .in(val(vec<int32_t>({3, 1})))
                    .in(f32(hs));
      if (r.op == OpKind::LSTM) c.in(f32(hs));
      c.attr("hidden_size", h).attr("direction", std::string("bidirectional")).attr("layout", layout)
          .outs(r.outputs).tol(kRecurrent).needs({Backend::cpu});
    }
  cs.add(OpKind::GRU, "linear_before_reset, wide").in(f32({3, 1, 40})).in(f32({1, 99, 40}, -0.3, 0.3))
      .in(f32({1, 99, 33}, -0.3, 0.3)).in(f32({1, 198}, -0.5, 0.5)).attr("hidden_size", int64_t(33))
      .attr("linear_before_reset", int64_t(1)).outs(2).tol(kRecurrent).needs({Backend::cpu});
  cs.add(OpKind::LSTM, "clip, wide").in(f32({2, 1, 48})).in(f32({1, 128, 48}, -1, 1)).in(f32({1, 128, 32}, -1, 1))
      .attr("hidden_size", int64_t(32)).attr("clip", 0.75).outs(3).tol(kRecurrent).needs({Backend::cpu});
  cs.add(OpKind::RNN, "activation Relu, f64").in(rnd(DType::f64, {3, 2, 2})).in(rnd(DType::f64, {1, 3, 2}, -0.5, 0.5))
      .in(rnd(DType::f64, {1, 3, 3}, -0.5, 0.5)).attr("hidden_size", int64_t(3))
      .attr("activations", std::vector<std::string>{"Relu"}).outs(2);
}

void resize_cases(Cases& cs) {
  for (const char* mode : {"nearest", "linear", "cubic"}) {
    cs.add(OpKind::Resize, std::string(mode) + " up").in(f32({1, 2, 5, 7})).in(none())
        .in(cst(vec<float>({1, 1, 2, 3}))).attr("mode", mode).tol({1e-5, 1e-5});
    cs.add(OpKind::Resize, std::string(mode) + " down").in(f32({2, 1, 9, 8})).in(none())
        .in(cst(vec<float>({1, 1, 0.5f, 0.75f}))).attr("mode", mode).tol({1e-5, 1e-5});
    cs.add(OpKind::Resize, std::string(mode) + " sizes, align_corners").in(f32({1, 3, 4, 6})).in(none()).in(none())
        .in(cst(vec<int64_t>({1, 3, 7, 5}))).attr("mode", mode)
        .attr("coordinate_transformation_mode", "align_corners").tol({1e-5, 1e-5});
  }
  cs.add(OpKind::Resize, "nearest floor, asymmetric").in(f32({1, 1, 3, 5})).in(none()).in(cst(vec<float>({1, 1, 2.5f, 1.5f})))
      .attr("nearest_mode", "floor").attr("coordinate_transformation_mode", "asymmetric").exact();
  // The CPU kernel's index tables (from the reference run on an index probe): a feature pyramid's 2x/4x/8x
  // upsampling (PP-OCR), each rounding and coordinate mode, a downscale by a fraction, rank 3 and 5, a scaled
  // batch axis, a row copied many times.
  for (float f : {2.f, 4.f, 8.f})
    cs.add(OpKind::Resize, "nearest x" + std::to_string(int(f))).in(f32({1, 3, 3, 5})).in(none())
        .in(cst(vec<float>({1, 1, f, f}))).attr("nearest_mode", "floor")
        .attr("coordinate_transformation_mode", "asymmetric").exact().needs({Backend::cpu});
  for (const char* nm : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"})
    for (const char* ct : {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn"})
      cs.add(OpKind::Resize, std::string("nearest ") + nm + ", " + ct).in(f32({1, 2, 5, 7})).in(none())
          .in(cst(vec<float>({1, 1, 2.6f, 0.7f}))).attr("nearest_mode", nm).attr("coordinate_transformation_mode", ct)
          .exact().needs({Backend::cpu});
  cs.add(OpKind::Resize, "nearest rank 3, sizes").in(f32({2, 3, 7})).in(none()).in(none())
      .in(cst(vec<int64_t>({2, 3, 16}))).exact().needs({Backend::cpu});
  cs.add(OpKind::Resize, "nearest rank 5, batch scaled").in(f32({2, 2, 3, 4, 5})).in(none())
      .in(cst(vec<float>({2, 1, 1.5f, 2, 0.5f}))).exact().needs({Backend::cpu});
  cs.add(OpKind::Resize, "nearest large").in(f32({1, 4, 24, 40})).in(none()).in(cst(vec<float>({1, 1, 4, 4})))
      .exact().needs({Backend::cpu});
  // half_pixel_symmetric (Resize-19): 9 * 0.6 = 5.4 floors to 5, which shifts the taps about the centre.
  cs.add(OpKind::Resize, "linear half_pixel_symmetric").in(f32({1, 2, 9, 7})).in(none())
      .in(cst(vec<float>({1, 1, 0.6f, 1.7f}))).attr("mode", "linear")
      .attr("coordinate_transformation_mode", "half_pixel_symmetric").tol({1e-5, 1e-5});
  cs.add(OpKind::Resize, "runtime sizes").in(f32({1, 2})).in(none()).in(none()).in(val(vec<int64_t>({1, 5}))).exact();
  // scales_with_sizes (keep_aspect_ratio_policy's form): sizes give the output, the f64 scale the coordinates;
  // 5 x 7/6 rounds to 6, and nearest half_pixel meets the tie 3.5 / (7/6) - 0.5 = 2.5.
  for (const char* mode : {"nearest", "linear"})
    cs.add(OpKind::Resize, std::string(mode) + " scales with sizes").in(f32({1, 2, 5, 6})).in(none())
        .in(cst(vec<double>({1, 1, 7.0 / 6, 7.0 / 6}))).in(cst(vec<int64_t>({1, 2, 6, 7}))).attr("mode", mode)
        .attr("scales_with_sizes", int64_t(1)).tol({1e-5, 1e-5});
}

}  // namespace

void add_recurrent_cases(Cases& cs) {
  rnn_cases(cs);
  resize_cases(cs);
}

}  // namespace cuvil::optest
