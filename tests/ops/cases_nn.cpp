// Cases of the convolution, pooling, matrix-product and quantization family (src/ir/ops/nn.cpp): odd spatial
// sizes, strides, pads, dilations and groups; weights as constants (oneDNN and the CPU GEMM pre-pack them) and
// as inputs; products with broadcast batches; integer and quantized products.
//
// Tolerance: oneDNN and the GEMM sum in another order (and with FMA) than the reference's f64 accumulation.
#include "harness.h"

namespace cuvil::optest {
namespace {

constexpr Backend D = Backend::onednn;
const Tol kProduct{1e-4, 1e-4};

void conv_cases(Cases& cs) {
  struct Cv {
    Ints x, w;
    Ints strides, pads, dilations;
    int64_t group;
    const char* what;
  };
  for (const Cv& c : {Cv{{1, 3, 11, 13}, {5, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, "3x3 same"},
                      Cv{{2, 4, 9, 7}, {6, 2, 3, 2}, {2, 1}, {0, 1, 1, 0}, {1, 1}, 2, "groups, stride, odd pads"},
                      Cv{{1, 6, 8, 8}, {6, 1, 3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}, 6, "depthwise dilated"},
                      Cv{{2, 5, 17}, {4, 5, 3}, {2}, {1, 1}, {1}, 1, "1-D"},
                      Cv{{1, 2, 5, 6, 7}, {3, 2, 2, 3, 2}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}, {1, 1, 1}, 1, "3-D"},
                      Cv{{1, 16, 7, 7}, {8, 16, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, "1x1"},
                      Cv{{1, 3, 17, 13}, {5, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, "3x3, odd"},
                      Cv{{2, 4, 9, 11}, {6, 2, 3, 2}, {2, 1}, {0, 1, 2, 0}, {1, 1}, 2, "groups, asymmetric pads"},
                      Cv{{1, 8, 15, 15}, {8, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 8, "depthwise, stride 2"},
                      Cv{{1, 3, 12, 10}, {4, 3, 3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}, 1, "dilation"},
                      Cv{{1, 16, 7, 7}, {33, 16, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, "1x1, odd channel count"},
                      Cv{{1, 5, 31}, {7, 5, 4}, {3}, {1, 2}, {1}, 1, "1-D, stride 3"}}) {
    AttrMap a{{"strides", c.strides}, {"pads", c.pads}, {"dilations", c.dilations}, {"group", c.group}};
    OpCase& k = cs.add(OpKind::Conv, std::string(c.what) + ", constant weights").in(f32(c.x)).in(f32(c.w).cst())
                    .in(f32({c.w[0]}).cst()).tol(kProduct).needs({D});
    k.attrs = a;
    OpCase& r = cs.add(OpKind::Conv, std::string(c.what) + ", weights as input").in(f32(c.x)).in(f32(c.w)).tol(kProduct)
                    .needs({D});
    r.attrs = a;
  }
  cs.add(OpKind::Conv, "auto_pad SAME_UPPER").in(f32({1, 2, 7, 6})).in(f32({3, 2, 3, 3}).cst())
      .attr("auto_pad", "SAME_UPPER").attr("strides", Ints{2, 2}).tol(kProduct);
  cs.add(OpKind::Conv, "f64").in(rnd(DType::f64, {1, 2, 5, 5})).in(rnd(DType::f64, {2, 2, 3, 3}));
  for (int64_t group : {1, 2})
    cs.add(OpKind::ConvTranspose, "group " + std::to_string(group))
        .in(f32({1, 4, 5, 6}))
        .in(f32({4, 3, 3, 3}).cst())
        .in(f32({3 * group}).cst())
        .attr("group", group)
        .attr("strides", Ints{2, 1})
        .attr("pads", Ints{1, 0, 0, 1})
        .attr("output_padding", Ints{1, 0})
        .tol(kProduct);
  cs.add(OpKind::ConvTranspose, "1-D dilated").in(f32({2, 3, 7})).in(f32({3, 2, 3})).attr("dilations", Ints{2}).tol(kProduct);
  // PP-OCR's upsampling (2x2, stride 2; one depthwise), odd sizes, 1-D and 3-D, dilations, no bias: oneDNN's
  // deconvolution with the weights reordered from ONNX's [C_in, C_out / group, k...].
  cs.add(OpKind::ConvTranspose, "2x2 stride 2").in(f32({1, 24, 5, 7})).in(f32({24, 6, 2, 2}).cst())
      .in(f32({6}).cst()).attr("strides", Ints{2, 2}).tol(kProduct);
  cs.add(OpKind::ConvTranspose, "depthwise 2x2 stride 2").in(f32({2, 8, 5, 3})).in(f32({8, 1, 2, 2}).cst())
      .attr("group", int64_t(8)).attr("strides", Ints{2, 2}).tol(kProduct);
  cs.add(OpKind::ConvTranspose, "3x3 stride 2, pads, output_padding").in(f32({1, 5, 6, 7})).in(f32({5, 3, 3, 3}).cst())
      .in(f32({3}).cst()).attr("strides", Ints{2, 2}).attr("pads", Ints{1, 1, 1, 1}).attr("output_padding", Ints{1, 1})
      .tol(kProduct);
  cs.add(OpKind::ConvTranspose, "1-D, constant weights, dilated").in(f32({2, 3, 9})).in(f32({3, 4, 3}).cst())
      .attr("dilations", Ints{2}).attr("strides", Ints{3}).tol(kProduct);
  cs.add(OpKind::ConvTranspose, "3-D, groups").in(f32({1, 4, 3, 4, 5})).in(f32({4, 3, 2, 3, 2}).cst())
      .attr("group", int64_t(2)).attr("strides", Ints{2, 1, 2}).attr("pads", Ints{0, 1, 0, 0, 1, 1}).tol(kProduct);
  cs.add(OpKind::ConvInteger, "u8 zero points")
      .in(rnd(DType::u8, {1, 3, 6, 7}, 0, 255))
      .in(rnd(DType::u8, {4, 3, 3, 3}, 0, 255).cst())
      .in(cst(scalar<uint8_t>(12)))
      .in(cst(scalar<uint8_t>(130)))
      .attr("pads", Ints{1, 1, 1, 1});
  cs.add(OpKind::ConvInteger, "i8 no zero points").in(rnd(DType::i8, {1, 2, 5, 5}, -128, 127)).in(rnd(DType::i8, {3, 2, 2, 2}, -128, 127));
  cs.add(OpKind::QLinearConv, "u8, per-channel weight scales")
      .in(rnd(DType::u8, {1, 3, 7, 6}, 0, 255))
      .in(cst(scalar<float>(0.1f)))
      .in(cst(scalar<uint8_t>(10)))
      .in(rnd(DType::u8, {4, 3, 3, 3}, 0, 255).cst())
      .in(cst(vec<float>({0.5f, 0.25f, 0.125f, 0.3f})))
      .in(cst(vec<uint8_t>({128, 120, 130, 127})))
      .in(cst(scalar<float>(0.2f)))
      .in(cst(scalar<uint8_t>(128)))
      .in(rnd(DType::i32, {4}, -500, 500).cst())
      .attr("pads", Ints{1, 1, 1, 1});
}

void pool_cases(Cases& cs) {
  struct Pl {
    Ints x, kernel, strides, pads;
    const char* what;
  };
  for (const Pl& p : {Pl{{2, 5, 13, 11}, {3, 3}, {2, 2}, {1, 1, 1, 1}, "3x3 stride 2"},
                      Pl{{1, 3, 8, 9}, {2, 2}, {2, 2}, {0, 0, 0, 0}, "2x2"},
                      Pl{{1, 2, 7, 5}, {3, 2}, {1, 2}, {1, 0, 1, 1}, "asymmetric"},
                      Pl{{2, 3, 17}, {4}, {3}, {1, 2}, "1-D"}}) {
    AttrMap a{{"kernel_shape", p.kernel}, {"strides", p.strides}, {"pads", p.pads}};
    OpCase& mx = cs.add(OpKind::MaxPool, p.what).in(f32(p.x).sp()).exact().needs({D});
    mx.attrs = a;
    OpCase& av = cs.add(OpKind::AveragePool, p.what).in(f32(p.x)).tol({1e-6, 1e-6}).needs({D});
    av.attrs = a;
    OpCase& ex = cs.add(OpKind::AveragePool, std::string(p.what) + ", pads counted").in(f32(p.x)).tol({1e-6, 1e-6})
                     .attr("count_include_pad", int64_t(1)).needs({D});
    for (auto& [k, v] : a) ex.attrs[k] = v;
  }
  cs.add(OpKind::MaxPool, "ceil mode").in(f32({2, 5, 13, 11})).attr("kernel_shape", Ints{3, 3}).attr("strides", Ints{2, 2})
      .attr("pads", Ints{1, 1, 1, 1}).attr("ceil_mode", int64_t(1)).exact().needs({D});
  for (int64_t count_pad : {0, 1})
    cs.add(OpKind::AveragePool, "2x3, pads " + std::to_string(count_pad)).in(f32({2, 5, 13, 11}))
        .attr("kernel_shape", Ints{2, 3}).attr("pads", Ints{0, 1, 1, 0}).attr("count_include_pad", count_pad)
        .tol({1e-4, 1e-4}).needs({D});
  // Dilated windows (AveragePool-19) run on the reference; its divisor counts the dilated taps inside the input.
  for (int64_t count_pad : {0, 1})
    cs.add(OpKind::AveragePool, "dilated, pads " + std::to_string(count_pad)).in(f32({1, 2, 9, 8}))
        .attr("kernel_shape", Ints{2, 3}).attr("dilations", Ints{2, 3}).attr("pads", Ints{1, 2, 0, 1})
        .attr("count_include_pad", count_pad).tol({1e-5, 1e-5});
  cs.add(OpKind::GlobalAveragePool, "channels last").in(f32({2, 7, 5, 3})).attr("channels_last", int64_t(1))
      .tol({1e-4, 1e-4}).needs({D});
  cs.add(OpKind::MaxPool, "indices, ceil mode").in(f32({1, 2, 6, 7})).attr("kernel_shape", Ints{3, 3})
      .attr("strides", Ints{2, 2}).attr("ceil_mode", int64_t(1)).outs(2).exact();
  cs.add(OpKind::MaxPool, "dilated, i8").in(rnd(DType::i8, {1, 2, 9, 9}, -128, 127)).attr("kernel_shape", Ints{2, 2})
      .attr("dilations", Ints{2, 2});
  cs.add(OpKind::GlobalAveragePool, "odd").in(f32({2, 7, 5, 3})).tol({1e-6, 1e-6}).needs({D});
  cs.add(OpKind::GlobalAveragePool, "1-D").in(f32({3, 4, 9})).tol({1e-6, 1e-6});
  cs.add(OpKind::GlobalMaxPool, "odd, specials").in(f32({2, 7, 5, 3}).sp()).exact().needs({D});
  cs.add(OpKind::MaxUnpool, "from pooled indices")
      .in(f32({1, 1, 2, 2}))
      .in(val(tensor<int64_t>({5, 7, 13, 15}, {1, 1, 2, 2})))
      .attr("kernel_shape", Ints{2, 2})
      .attr("strides", Ints{2, 2})
      .exact();
}

void product_cases(Cases& cs) {
  const Backend C = Backend::cpu;
  cs.add(OpKind::MatMul, "2-D").in(f32({7, 13})).in(f32({13, 9}).cst()).tol(kProduct).needs({D});
  cs.add(OpKind::MatMul, "batched x constant").in(f32({3, 5, 17})).in(f32({17, 33}).cst()).tol(kProduct).needs({D});
  cs.add(OpKind::MatMul, "batched, broadcast").in(f32({2, 3, 5, 8})).in(f32({1, 3, 8, 6})).tol(kProduct).needs({D});
  cs.add(OpKind::MatMul, "CPU GEMM, constant B").in(f32({64, 96})).in(f32({96, 80}).cst()).tol(kProduct).needs({C});
  cs.add(OpKind::MatMul, "CPU GEMM, odd sizes").in(f32({2, 37, 41})).in(f32({41, 29}).cst()).tol(kProduct).needs({C});
  cs.add(OpKind::MatMul, "vector times matrix").in(f32({13})).in(f32({13, 5})).tol(kProduct);
  cs.add(OpKind::MatMul, "matrix times vector").in(f32({4, 13})).in(f32({13})).tol(kProduct);
  cs.add(OpKind::MatMul, "empty inner dim").in(f32({3, 0})).in(f32({0, 4})).tol(kProduct);
  cs.add(OpKind::MatMul, "i64").in(i64({3, 4})).in(i64({4, 5}));
  cs.add(OpKind::MatMul, "f64").in(rnd(DType::f64, {3, 4})).in(rnd(DType::f64, {4, 5}));
  cs.add(OpKind::MatMul, "views").in(f32({6, 9}).view()).in(f32({9, 4}).view()).tol(kProduct);
  cs.add(OpKind::Gemm, "transA transB alpha bias")
      .in(f32({11, 7}))
      .in(f32({5, 11}).cst())
      .in(f32({5}).cst())
      .attr("transA", int64_t(1))
      .attr("transB", int64_t(1))
      .attr("alpha", 0.5)
      .tol(kProduct)
      .needs({D});
  cs.add(OpKind::Gemm, "C full, beta").in(f32({4, 6})).in(f32({6, 3})).in(f32({4, 3})).attr("beta", 0.25).tol(kProduct)
      .needs({D});
  cs.add(OpKind::Gemm, "no C, CPU GEMM").in(f32({64, 33})).in(f32({33, 17}).cst()).tol(kProduct).needs({C});
  cs.add(OpKind::MatMulInteger, "u8 x u8 zero points")
      .in(rnd(DType::u8, {5, 7}, 0, 255))
      .in(rnd(DType::u8, {7, 3}, 0, 255))
      .in(cst(scalar<uint8_t>(3)))
      .in(cst(scalar<uint8_t>(128)));
  cs.add(OpKind::MatMulInteger, "dequantizing: runtime zero point, two scales, bias")
      .in(rnd(DType::u8, {2, 5, 33}, 0, 255))
      .in(rnd(DType::i8, {33, 7}, -128, 127).cst())
      .in(val(scalar<uint8_t>(131)))
      .in(none())
      .in(val(scalar<float>(0.02f)))
      .in(f32({7}, 0.001, 0.01).cst())
      .in(f32({7}))
      .tol(kExact);
  cs.add(OpKind::MatMulInteger, "dequantizing: u8 x u8 zero points, one scale")
      .in(rnd(DType::u8, {6, 9}, 0, 255))
      .in(rnd(DType::u8, {9, 4}, 0, 255).cst())
      .in(cst(scalar<uint8_t>(3)))
      .in(cst(scalar<uint8_t>(128)))
      .in(val(scalar<float>(0.5f)))
      .tol(kExact);
  cs.add(OpKind::MatMulInteger, "i8 batched").in(rnd(DType::i8, {2, 3, 4}, -128, 127)).in(rnd(DType::i8, {4, 6}, -128, 127));
  cs.add(OpKind::QLinearMatMul, "u8")
      .in(rnd(DType::u8, {4, 9}, 0, 255))
      .in(cst(scalar<float>(0.05f)))
      .in(cst(scalar<uint8_t>(20)))
      .in(rnd(DType::u8, {9, 5}, 0, 255))
      .in(cst(scalar<float>(0.1f)))
      .in(cst(scalar<uint8_t>(50)))
      .in(cst(scalar<float>(0.5f)))
      .in(cst(scalar<uint8_t>(100)));
  cs.add(OpKind::Einsum, "batched product").in(f32({2, 3, 4})).in(f32({2, 4, 5})).attr("equation", "bij,bjk->bik").tol(kProduct);
  cs.add(OpKind::Einsum, "trace and transpose").in(f32({4, 4, 3})).attr("equation", "iij->j").tol(kProduct);
  cs.add(OpKind::Einsum, "outer, implicit output").in(f32({3})).in(f32({5})).attr("equation", "i,j").tol(kProduct);
  cs.add(OpKind::Det, "batch of 3x3").in(f32({4, 3, 3})).tol({1e-5, 1e-5});
  cs.add(OpKind::Det, "singular and 1x1").in(val(tensor<float>({1, 2, 2, 4}, {2, 2}))).tol({1e-6, 1e-6});
}

void quantize_cases(Cases& cs) {
  for (DType q : {DType::u8, DType::i8}) {
    Tensor zp = q == DType::u8 ? scalar<uint8_t>(128) : Tensor(scalar<int8_t>(-3));
    std::string qn(dtype_name(q));
    cs.add(OpKind::QuantizeLinear, qn + ", ties and saturation").in(f32({5, 33}, -60, 60).ties(0.125))
        .in(cst(scalar<float>(0.25f))).in(cst(zp)).needs({Backend::generated});
    cs.add(OpKind::QuantizeLinear, qn + ", runtime scale").in(f32({37}).sp()).in(val(scalar<float>(0.1f))).in(val(zp));
    cs.add(OpKind::DequantizeLinear, qn).in(rnd(q, {5, 33}, -128, 255)).in(cst(scalar<float>(0.1f))).in(cst(zp)).exact();
    Tensor zps = Tensor::zeros(q, {3});
    cs.add(OpKind::QuantizeLinear, qn + ", per axis").in(f32({2, 3, 5}, -30, 30)).in(cst(vec<float>({0.1f, 0.2f, 0.3f})))
        .in(cst(zps)).attr("axis", int64_t(1));
    cs.add(OpKind::DequantizeLinear, qn + ", per axis").in(rnd(q, {2, 3, 5}, -128, 255)).in(cst(vec<float>({0.1f, 0.2f, 0.3f})))
        .in(cst(zps)).attr("axis", int64_t(1)).exact();
  }
  // 16-bit grids (opset 21): saturation at their own bounds, ties to even.
  for (DType q : {DType::u16, DType::i16}) {
    Tensor zp = q == DType::u16 ? Tensor(scalar<uint16_t>(30000)) : Tensor(scalar<int16_t>(-7));
    std::string qn(dtype_name(q));
    cs.add(OpKind::QuantizeLinear, qn + ", ties and saturation").in(f32({5, 33}, -9000, 9000).ties(0.125))
        .in(cst(scalar<float>(0.25f))).in(cst(zp)).needs({Backend::generated});
    cs.add(OpKind::DequantizeLinear, qn).in(rnd(q, {5, 33}, -32768, 65535)).in(cst(scalar<float>(0.1f))).in(cst(zp))
        .exact();
  }
  cs.add(OpKind::QuantizeLinear, "no zero point").in(f32({37}, -30, 30)).in(cst(scalar<float>(0.5f)));
  cs.add(OpKind::DequantizeLinear, "i32").in(rnd(DType::i32, {37}, -100000, 100000)).in(cst(scalar<float>(3e-5f))).exact();
  cs.add(OpKind::DynamicQuantizeLinear, "odd").in(f32({7, 13}, -5, 9)).outs(3).exact();
  cs.add(OpKind::DynamicQuantizeLinear, "all positive").in(f32({37}, 1, 2)).outs(3).exact();
}

}  // namespace

void add_nn_cases(Cases& cs) {
  // RotaryEmbedding: 4-D and 3-D (num_heads) inputs, halves and interleaved pairs, a partial rotary dim, caches
  // per batch and position or indexed by position_ids.
  for (int64_t inter : {0, 1}) {
    std::string w = inter ? ", interleaved" : "";
    cs.add(OpKind::RotaryEmbedding, "4-D, position ids" + w).in(f32({2, 3, 5, 8})).in(f32({11, 4}, -1, 1))
        .in(f32({11, 4}, -1, 1)).in(i64({2, 5}, 0, 10.4)).attr("interleaved", inter);
    cs.add(OpKind::RotaryEmbedding, "3-D, num_heads 3, rot 4" + w).in(f32({2, 5, 18})).in(f32({2, 5, 2}, -1, 1))
        .in(f32({2, 5, 2}, -1, 1)).attr("interleaved", inter).attr("num_heads", int64_t(3))
        .attr("rotary_embedding_dim", int64_t(4));
  }
  cs.add(OpKind::RotaryEmbedding, "f16").in(rnd(DType::f16, {1, 2, 3, 6})).in(rnd(DType::f16, {1, 3, 3}, -1, 1))
      .in(rnd(DType::f16, {1, 3, 3}, -1, 1));
  conv_cases(cs);
  pool_cases(cs);
  product_cases(cs);
  quantize_cases(cs);
}

}  // namespace cuvil::optest
