// Cases of the shape and data-movement family (src/ir/ops/tensor.cpp): reshapes, transposes over every
// permutation and dtype, slices with steps and clamping, gathers and scatters, padding modes, data-dependent
// outputs (NonZero, Unique, Compress). Data movement is exact on every backend.
#include <algorithm>
#include <numeric>

#include "harness.h"

namespace cuvil::optest {
namespace {

constexpr Backend C = Backend::cpu;

void reshape_cases(Cases& cs) {
  cs.add(OpKind::Reshape, "infer a dim").in(f32({2, 3, 4})).in(cst(vec<int64_t>({0, -1}))).exact();
  cs.add(OpKind::Reshape, "runtime shape, i64").in(i64({6, 5})).in(val(vec<int64_t>({3, 10}))).exact();
  cs.add(OpKind::Reshape, "empty").in(f32({0, 4})).in(cst(vec<int64_t>({0, 2, 2}))).exact();
  cs.add(OpKind::Reshape, "view").in(f32({4, 6}).view()).in(cst(vec<int64_t>({24}))).exact();
  cs.add(OpKind::Shape, "rank 3").in(f32({2, 3, 5})).exact();
  cs.add(OpKind::Shape, "start and end").in(f32({2, 3, 5, 7})).attr("start", int64_t(1)).attr("end", int64_t(-1));
  cs.add(OpKind::Size, "odd").in(f32({3, 7})).exact();
  cs.add(OpKind::Size, "empty").in(f32({3, 0})).exact();
  cs.add(OpKind::Flatten, "axis 2").in(f32({2, 3, 4, 5})).attr("axis", int64_t(2)).exact();
  cs.add(OpKind::Flatten, "axis 0").in(rnd(DType::u8, {3, 5}, 0, 255)).attr("axis", int64_t(0));
  cs.add(OpKind::Squeeze, "all ones").in(f32({1, 3, 1, 5})).exact();
  cs.add(OpKind::Squeeze, "axes").in(f32({1, 3, 1, 5})).in(cst(vec<int64_t>({-2}))).exact();
  cs.add(OpKind::Unsqueeze, "two axes").in(f32({3, 4})).in(cst(vec<int64_t>({3, 0}))).exact();
  cs.add(OpKind::Unsqueeze, "scalar").in(f32({})).in(cst(vec<int64_t>({0}))).exact();
  cs.add(OpKind::Expand, "broadcast").in(f32({3, 1, 5})).in(cst(vec<int64_t>({2, 3, 4, 5}))).exact();
  cs.add(OpKind::Expand, "i64, runtime shape").in(i64({1, 7})).in(val(vec<int64_t>({3, 1}))).exact();
  cs.add(OpKind::Tile, "repeats").in(f32({2, 3})).in(cst(vec<int64_t>({2, 3}))).exact();
  cs.add(OpKind::Tile, "bool").in(rnd(DType::boolean, {3, 1}, -1, 1)).in(cst(vec<int64_t>({1, 4})));
}

// Every permutation of a rank-r shape, filled with arbitrary bytes for non-float dtypes: transposes move bits.
void transpose_cases(Cases& cs) {
  struct P {
    Ints shape;
    DType dtype;
  };
  for (const P& p : {P{{33, 47}, DType::f32}, P{{1, 7}, DType::f32}, P{{3, 35, 41}, DType::f32},
                     P{{2, 3, 1, 5}, DType::i64}, P{{2, 17, 33, 3}, DType::u8}, P{{3, 4, 5, 6}, DType::f16},
                     P{{2, 1, 3, 1, 2, 3}, DType::boolean}, P{{2, 3, 2, 3, 2}, DType::f32}, P{{37, 50}, DType::i32},
                     P{{16, 16}, DType::i32}, P{{3, 33, 20}, DType::i32}, P{{2, 48, 7, 17}, DType::i32},
                     P{{3, 53, 2}, DType::f32}, P{{15, 33}, DType::i32}}) {
    Ints perm(p.shape.size());
    std::iota(perm.begin(), perm.end(), int64_t(0));
    do {
      Input x = rnd(p.dtype, p.shape, -1000, 1000);
      cs.add(OpKind::Transpose, "perm " + shape_str(perm)).in(x).attr("perm", perm).exact().needs({C});
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
  struct T {
    Ints shape, perm;
    const char* what;
  };
  for (const T& t : {T{{2, 64, 56, 56}, {0, 2, 3, 1}, "NCHW to NHWC"}, T{{2, 56, 56, 64}, {0, 3, 1, 2}, "NHWC to NCHW"},
                     T{{2, 128, 12, 64}, {0, 2, 1, 3}, "head split"}, T{{2, 12, 128, 64}, {0, 1, 3, 2}, "K^T"},
                     T{{1000, 1001}, {1, 0}, "large 2-D"}, T{{2, 3, 4, 5, 6, 7}, {5, 3, 1, 4, 0, 2}, "rank 6"},
                     T{{2, 1, 37, 41}, {0, 2, 3, 1}, "one channel"},
                     // A channel shuffle of two groups in NHWC: rows of 2 from 2 planes (interleave2), 16-wide
                     // blocks and an odd remainder, then a whole tensor of them.
                     T{{5, 3, 2, 58}, {0, 1, 3, 2}, "shuffle of 2 groups"},
                     T{{1, 2, 37}, {0, 2, 1}, "two planes, odd"}, T{{2, 32}, {1, 0}, "two planes, whole blocks"},
                     T{{1, 28, 28, 2, 116}, {0, 1, 2, 4, 3}, "shuffle, large"},
                     // An image's 3 planes into rows of 3 (interleave3): tiles the blocks cover whole, then an odd
                     // remainder after the blocks.
                     T{{1, 3, 224, 224}, {0, 2, 3, 1}, "RGB image to NHWC"},
                     T{{2, 3, 19, 23}, {0, 2, 3, 1}, "three planes, odd"},
                     // Outputs of 16 MB and more stream whole 16 x 16 blocks: aligned rows, no aligned row, back.
                     T{{1, 64, 256, 257}, {0, 2, 3, 1}, "streamed, aligned"},
                     T{{1, 65, 256, 253}, {0, 2, 3, 1}, "streamed, unaligned"},
                     T{{1, 256, 257, 64}, {0, 3, 1, 2}, "streamed back"}})
    cs.add(OpKind::Transpose, t.what).in(f32(t.shape)).attr("perm", t.perm).exact().needs({C});
  cs.add(OpKind::Transpose, "default perm").in(f32({3, 4, 5})).exact().needs({C});
  cs.add(OpKind::Transpose, "negative perm").in(f32({3, 4, 5})).attr("perm", Ints{-1, 0, 1}).exact().needs({C});
  cs.add(OpKind::Transpose, "scalar").in(f32({})).attr("perm", Ints{}).exact().needs({C});
  cs.add(OpKind::Transpose, "empty").in(f32({0, 3})).attr("perm", Ints{1, 0}).exact();
  cs.add(OpKind::Transpose, "view").in(f32({5, 7}).view()).attr("perm", Ints{1, 0}).exact();
}

void slice_cases(Cases& cs) {
  struct S {
    Ints shape, starts, ends, axes, steps;
    const char* what;
  };
  for (const S& t : {S{{128, 2304}, {768}, {1536}, {1}, {1}, "packed QKV split"},
                     S{{2, 7, 33}, {1, -5}, {100, 30}, {1, 2}, {2, 3}, "steps, clamping, negative start"},
                     S{{5, 6, 7}, {-1}, {-100}, {0}, {-2}, "backwards with a stride"},
                     S{{4, 9}, {8}, {0}, {1}, {-1}, "reversed innermost"},
                     S{{3, 4, 5}, {0, 0, 0}, {3, 4, 5}, {0, 1, 2}, {1, 1, 1}, "everything"},
                     S{{300, 512}, {1}, {300}, {0}, {1}, "large, threaded rows"}})
    cs.add(OpKind::Slice, t.what)
        .in(f32(t.shape))
        .in(cst(vec<int64_t>(t.starts)))
        .in(cst(vec<int64_t>(t.ends)))
        .in(cst(vec<int64_t>(t.axes)))
        .in(cst(vec<int64_t>(t.steps)))
        .exact()
        .needs({C});
  cs.add(OpKind::Slice, "i64").in(i64({2, 3})).in(cst(vec<int64_t>({1}))).in(cst(vec<int64_t>({3}))).in(cst(vec<int64_t>({1})))
      .needs({C});
  cs.add(OpKind::Slice, "runtime starts").in(f32({4, 4})).in(val(vec<int64_t>({1}))).in(cst(vec<int64_t>({3}))).exact();
  cs.add(OpKind::Slice, "empty result").in(f32({4, 4})).in(cst(vec<int64_t>({3}))).in(cst(vec<int64_t>({1}))).exact();
  cs.add(OpKind::Slice, "view").in(f32({6, 8}).view()).in(cst(vec<int64_t>({1}))).in(cst(vec<int64_t>({7})))
      .in(cst(vec<int64_t>({1}))).exact();
}

void concat_split_cases(Cases& cs) {
  cs.add(OpKind::Concat, "axis 1, odd").in(f32({2, 3, 5})).in(f32({2, 1, 5})).in(f32({2, 7, 5})).attr("axis", int64_t(1)).exact();
  cs.add(OpKind::Concat, "negative axis, i64").in(i64({3, 2})).in(i64({3, 5})).attr("axis", int64_t(-1));
  cs.add(OpKind::Concat, "an empty part").in(f32({0, 4})).in(f32({3, 4})).attr("axis", int64_t(0)).exact();
  // Channels-last Concats (a row per pixel, short runs: 128 bytes, odd ones, over 512 bytes), threaded when large,
  // and other element sizes.
  cs.add(OpKind::Concat, "channels last").in(f32({1, 5, 7, 32})).in(f32({1, 5, 7, 32})).in(f32({1, 5, 7, 17}))
      .attr("axis", int64_t(3)).exact().needs({C});
  cs.add(OpKind::Concat, "channels last, large").in(f32({1, 56, 56, 64})).in(f32({1, 56, 56, 160}))
      .attr("axis", int64_t(-1)).exact().needs({C});
  cs.add(OpKind::Concat, "middle axis, u8").in(rnd(DType::u8, {3, 5, 2, 3}, 0, 255)).in(rnd(DType::u8, {3, 1, 2, 3}, 0, 255))
      .attr("axis", int64_t(1)).exact().needs({C});
  cs.add(OpKind::Concat, "f16, one row").in(rnd(DType::f16, {2, 3}, -10, 10)).in(rnd(DType::f16, {1, 3}, -10, 10))
      .attr("axis", int64_t(0)).exact().needs({C});
  cs.add(OpKind::Concat, "one input").in(f32({4, 3})).attr("axis", int64_t(1)).exact().needs({C});
  cs.add(OpKind::Split, "equal").in(f32({6, 5})).outs(3).exact();
  cs.add(OpKind::Split, "sizes").in(f32({4, 11})).in(cst(vec<int64_t>({2, 9}))).attr("axis", int64_t(1)).outs(2).exact();
  cs.add(OpKind::Split, "uneven num_outputs").in(f32({7, 3})).attr("num_outputs", int64_t(3)).outs(3).exact();
  cs.add(OpKind::Split, "middle axis, odd sizes").in(f32({3, 2, 7, 5})).in(cst(vec<int64_t>({1, 4, 2})))
      .attr("axis", int64_t(2)).outs(3).exact();
  cs.add(OpKind::Split, "negative axis, empty part").in(i64({2, 3, 9})).in(cst(vec<int64_t>({4, 0, 5})))
      .attr("axis", int64_t(-1)).outs(3).exact();
  cs.add(OpKind::Split, "f16, num_outputs, leading axis").in(rnd(DType::f16, {5, 1, 3, 4}))
      .attr("num_outputs", int64_t(2)).outs(2).exact();
}

void gather_scatter_cases(Cases& cs) {
  cs.add(OpKind::Gather, "axis 0, negative indices").in(f32({7, 5})).in(val(tensor<int64_t>({0, -1, 3, 3, 6, -7}, {2, 3}))).exact();
  cs.add(OpKind::Gather, "axis 1, i32 indices").in(f32({3, 9})).in(val(vec<int32_t>({8, 0, 4}))).attr("axis", int64_t(1)).exact();
  cs.add(OpKind::Gather, "scalar index").in(i64({5, 3})).in(cst(scalar<int64_t>(2)));
  cs.add(OpKind::Gather, "empty indices").in(f32({5, 3})).in(val(Tensor::zeros(DType::i64, {0}))).exact();
  cs.add(OpKind::GatherElements, "axis 1").in(f32({3, 4})).in(val(tensor<int64_t>({3, 0, -1, 1, 2, 2, 0, 0, 1}, {3, 3})))
      .attr("axis", int64_t(1)).exact();
  cs.add(OpKind::GatherElements, "axis 0").in(f32({4, 3})).in(val(tensor<int32_t>({3, 0, 1, -4, 2, 2}, {2, 3}))).exact();
  cs.add(OpKind::GatherND, "tuples").in(f32({3, 4, 5})).in(val(tensor<int64_t>({0, 1, 2, 3, -1, 0}, {3, 2}))).exact();
  cs.add(OpKind::GatherND, "batch_dims 1").in(f32({2, 3, 4})).in(val(tensor<int64_t>({1, 0}, {2, 1})))
      .attr("batch_dims", int64_t(1)).exact();
  for (const char* red : {"none", "add", "mul", "max", "min"}) {
    cs.add(OpKind::ScatterElements, std::string("reduction ") + red)
        .in(f32({3, 5}))
        .in(val(tensor<int64_t>({0, 4, 2, 1, -1, 3}, {3, 2})))
        .in(f32({3, 2}))
        .attr("axis", int64_t(1))
        .attr("reduction", red)
        .exact();
    cs.add(OpKind::ScatterND, std::string("reduction ") + red)
        .in(f32({4, 3}))
        .in(val(tensor<int64_t>({2, 0, -1}, {3, 1})))
        .in(f32({3, 3}))
        .attr("reduction", red)
        .exact();
  }
  cs.add(OpKind::ScatterND, "elements").in(i64({3, 4})).in(val(tensor<int64_t>({0, 1, 2, 3}, {2, 2}))).in(i64({2}));
}

void pad_and_make_cases(Cases& cs) {
  for (const char* mode : {"constant", "reflect", "edge", "wrap"}) {
    cs.add(OpKind::Pad, mode).in(f32({3, 5})).in(cst(vec<int64_t>({1, 2, 2, 1}))).attr("mode", mode).exact();
    cs.add(OpKind::Pad, std::string(mode) + ", rank 4 i64").in(i64({1, 2, 3, 4})).in(cst(vec<int64_t>({0, 0, 1, 2, 0, 0, 2, 1})))
        .attr("mode", mode);
  }
  cs.add(OpKind::Pad, "constant value, negative pads").in(f32({4, 6})).in(cst(vec<int64_t>({1, -1, -2, 2})))
      .in(cst(scalar<float>(2.5f))).exact();
  cs.add(OpKind::Pad, "axes").in(f32({2, 3, 4})).in(cst(vec<int64_t>({1, 2}))).in(none()).in(cst(vec<int64_t>({-1}))).exact();
  // The CPU kernel (kernels/cpu/pad.cpp): every mode on rank 1-4 with pads on several axes, pads wider than a
  // wrap period, the constant given at run time, negative pads, silero-vad's reflect of its audio frame.
  for (const char* mode : {"constant", "reflect", "edge", "wrap"}) {
    cs.add(OpKind::Pad, std::string(mode) + ", rank 4 f32").in(f32({2, 3, 4, 5}))
        .in(cst(vec<int64_t>({0, 2, 1, 3, 1, 0, 3, 2}))).attr("mode", mode).exact().needs({Backend::cpu});
    cs.add(OpKind::Pad, std::string(mode) + ", rank 1").in(f32({7})).in(cst(vec<int64_t>({3, 5})))
        .attr("mode", mode).exact().needs({Backend::cpu});
  }
  cs.add(OpKind::Pad, "wrap wider than the dim").in(f32({2, 3})).in(cst(vec<int64_t>({0, 4, 1, 7})))
      .attr("mode", std::string("wrap")).exact();
  cs.add(OpKind::Pad, "constant at run time, negative pads").in(f32({3, 4, 6})).in(cst(vec<int64_t>({-1, 2, 1, 1, -1, 0})))
      .in(val(scalar<float>(-7.25f))).exact().needs({Backend::cpu});
  cs.add(OpKind::Pad, "reflect, silero-vad frame").in(f32({1, 576})).in(cst(vec<int64_t>({0, 32, 0, 32})))
      .attr("mode", std::string("reflect")).exact().needs({Backend::cpu});
  cs.add(OpKind::Range, "f32").in(cst(scalar<float>(-1.5f))).in(cst(scalar<float>(7.f))).in(cst(scalar<float>(0.75f))).exact();
  cs.add(OpKind::Range, "i64 negative delta").in(val(scalar<int64_t>(20))).in(val(scalar<int64_t>(-3))).in(val(scalar<int64_t>(-4)));
  cs.add(OpKind::Range, "empty").in(val(scalar<int32_t>(5))).in(val(scalar<int32_t>(1))).in(val(scalar<int32_t>(1)));
  cs.add(OpKind::ConstantOfShape, "default zero").in(cst(vec<int64_t>({2, 3})));
  cs.add(OpKind::ConstantOfShape, "value").in(val(vec<int64_t>({3, 1, 5}))).attr("value", vec<int32_t>({7}));
  cs.add(OpKind::ConstantOfShape, "empty").in(cst(vec<int64_t>({0, 4}))).attr("value", vec<float>({1.5f}));
  cs.add(OpKind::EyeLike, "k 1").in(f32({4, 6})).attr("k", int64_t(1)).exact();
  cs.add(OpKind::EyeLike, "k -2, dtype").in(f32({5, 3})).attr("k", int64_t(-2)).attr("dtype", int64_t(dtype_onnx_id(DType::i32)));
  for (int64_t upper : {0, 1}) {
    cs.add(OpKind::Trilu, "upper " + std::to_string(upper)).in(f32({2, 4, 5})).attr("upper", upper).exact();
    cs.add(OpKind::Trilu, "upper " + std::to_string(upper) + ", k").in(i64({5, 3})).in(cst(scalar<int64_t>(-1)))
        .attr("upper", upper);
  }
  cs.add(OpKind::OneHot, "axis -1").in(val(tensor<int64_t>({0, 2, -1, 1, 5, 1}, {2, 3}))).in(cst(scalar<int32_t>(3)))
      .in(cst(vec<float>({0.f, 1.f}))).exact();
  cs.add(OpKind::OneHot, "axis 0").in(val(vec<int32_t>({0, 3, 1}))).in(cst(scalar<int64_t>(4))).in(cst(vec<int64_t>({-1, 5})))
      .attr("axis", int64_t(0));
}

void data_dependent_cases(Cases& cs) {
  cs.add(OpKind::NonZero, "f32 with zeros").in(f32({3, 7}).ties(2));
  cs.add(OpKind::NonZero, "bool").in(rnd(DType::boolean, {2, 3, 5}, -1, 1));
  cs.add(OpKind::NonZero, "all zero").in(val(Tensor::zeros(DType::i32, {4})));
  cs.add(OpKind::Compress, "axis 0").in(f32({3, 4})).in(val(vec<bool>({false, true, true}))).attr("axis", int64_t(0)).exact();
  cs.add(OpKind::Compress, "flattened, short condition").in(f32({3, 4})).in(val(vec<bool>({true, false, true, true, false})))
      .exact();
  cs.add(OpKind::Unique, "sorted, all outputs").in(f32({13}).ties(1)).outs(4).exact();
  cs.add(OpKind::Unique, "unsorted").in(i64({17})).attr("sorted", int64_t(0)).outs(4);
  cs.add(OpKind::Unique, "axis 0").in(val(tensor<int64_t>({1, 2, 1, 2, 3, 4, 1, 2}, {4, 2}))).attr("axis", int64_t(0)).outs(4);
}

void rearrange_cases(Cases& cs) {
  for (const char* mode : {"DCR", "CRD"})
    cs.add(OpKind::DepthToSpace, mode).in(f32({2, 8, 3, 5})).attr("blocksize", int64_t(2)).attr("mode", mode).exact();
  cs.add(OpKind::SpaceToDepth, "blocksize 2").in(f32({2, 3, 4, 6})).attr("blocksize", int64_t(2)).exact();
  cs.add(OpKind::SpaceToDepth, "blocksize 2, CRD").in(f32({2, 3, 4, 6})).attr("blocksize", int64_t(2))
      .attr("mode", "CRD").exact();
  cs.add(OpKind::SpaceToDepth, "blocksize 3, i64").in(i64({1, 2, 3, 9})).attr("blocksize", int64_t(3));
  cs.add(OpKind::ReverseSequence, "batch axis 1").in(f32({4, 3, 2})).in(val(vec<int64_t>({3, 1, 4})))
      .attr("batch_axis", int64_t(1)).attr("time_axis", int64_t(0)).exact();
  cs.add(OpKind::ReverseSequence, "batch axis 0").in(i64({3, 5})).in(val(vec<int64_t>({5, 0, 2})))
      .attr("batch_axis", int64_t(0)).attr("time_axis", int64_t(1));
}

}  // namespace

void add_tensor_cases(Cases& cs) {
  // BitCast: bytes reinterpreted, specials included (NaN payloads survive), bool as u8, an empty tensor.
  cs.add(OpKind::BitCast, "f32 as i32").in(f32({3, 5}).sp()).attr("to", int64_t(6));
  cs.add(OpKind::BitCast, "i64 as f64").in(i64({7}, -1e6, 1e6)).attr("to", int64_t(11));
  cs.add(OpKind::BitCast, "u16 as i16").in(rnd(DType::u16, {2, 3}, 0, 65535)).attr("to", int64_t(5));
  cs.add(OpKind::BitCast, "bool as u8").in(rnd(DType::boolean, {9}, -1, 1)).attr("to", int64_t(2));
  cs.add(OpKind::BitCast, "f16 as bf16").in(rnd(DType::f16, {4, 4})).attr("to", int64_t(16)).exact();
  cs.add(OpKind::BitCast, "empty").in(f32({0, 3})).attr("to", int64_t(12));
  reshape_cases(cs);
  transpose_cases(cs);
  slice_cases(cs);
  concat_split_cases(cs);
  gather_scatter_cases(cs);
  pad_and_make_cases(cs);
  data_dependent_cases(cs);
  rearrange_cases(cs);
}

}  // namespace cuvil::optest
