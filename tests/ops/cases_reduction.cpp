// Cases of the reduction family (src/ir/ops/reduction.cpp): Reduce* over rows, columns, several and all axes;
// arg reductions with ties; the softmax family over every axis with special rows; CumSum; TopK with ties, NaN
// and every dtype family; normalizations; LRN; losses.
#include "harness.h"

namespace cuvil::optest {
namespace {

constexpr Backend G = Backend::generated, C = Backend::cpu;

void reduce_cases(Cases& cs) {
  const OpKind ops[] = {OpKind::ReduceSum, OpKind::ReduceMean,      OpKind::ReduceMax,  OpKind::ReduceMin,
                        OpKind::ReduceL1,  OpKind::ReduceL2,        OpKind::ReduceSumSquare,
                        OpKind::ReduceLogSumExp, OpKind::ReduceProd, OpKind::ReduceLogSum};
  for (OpKind op : ops) {
    bool logsum = op == OpKind::ReduceLogSum, prod = op == OpKind::ReduceProd;
    double lo = logsum ? 0.5 : prod ? 0.8 : -3, hi = logsum ? 1.5 : prod ? 1.25 : 3;
    // f32 sums of up to 1000 terms against the reference's f64: a few 1e-6 relative, more where terms cancel.
    Tol t{1e-5, 2e-5};
    bool order_free = op == OpKind::ReduceMax || op == OpKind::ReduceMin;
    for (Ints shape : {Ints{1}, Ints{5}, Ints{3, 31}, Ints{2, 3, 64}, Ints{4, 1000}, Ints{7, 33}})
      for (int64_t keep : {0, 1})
        cs.add(op, "rows, keepdims " + std::to_string(keep))
            .in(f32(shape, lo, hi))
            .in(cst(vec<int64_t>({-1})))
            .attr("keepdims", keep)
            .tol(DType::f32, t)
            .needs({G});
    cs.add(op, "columns").in(f32({9, 2, 17}, lo, hi)).in(cst(vec<int64_t>({0}))).tol(DType::f32, t);
    // (Special values only where the order of the terms cannot matter: 1e30 + x - 1e30 is 0 or x.)
    Input two = f32({3, 4, 5}, lo, hi);
    if (order_free) two.sp();
    cs.add(op, order_free ? "two axes, specials" : "two axes").in(two).in(cst(vec<int64_t>({1, 2}))).tol(DType::f32, t);
    cs.add(op, "all axes").in(f32({3, 4, 5}, lo, hi)).tol(DType::f32, t);
    cs.add(op, "axes (0, 2, 3) at batch 1").in(f32({1, 5, 6, 7}, lo, hi)).in(cst(vec<int64_t>({0, 2, 3}))).tol(DType::f32, t);
    cs.add(op, "f64").in(rnd(DType::f64, {3, 17}, lo, hi)).in(cst(vec<int64_t>({1})));
    cs.add(op, "empty axis").in(f32({3, 0}, lo, hi)).in(cst(vec<int64_t>({1})));
    cs.add(op, "runtime axes").in(f32({3, 5}, lo, hi)).in(val(vec<int64_t>({1}))).tol(DType::f32, t);
  }
  for (OpKind op : {OpKind::ReduceProd, OpKind::ReduceL1, OpKind::ReduceSumSquare, OpKind::ReduceSum, OpKind::ReduceMax})
    for (DType dt : {DType::i32, DType::i64})
      cs.add(op, std::string(dtype_name(dt))).in(rnd(dt, {7, 33})).in(cst(vec<int64_t>({-1})));
  // Beyond f32's range inside the sum of squares: L2 and LogSum scale by the largest magnitude.
  Tensor big = tensor<float>({3e38f, 3e38f, -1e38f, 1, 1e30f, 1e30f, 1e-40f, 0, 1e-40f, 2e-40f, 0, 1e-45f}, {3, 4});
  for (OpKind op : {OpKind::ReduceL2, OpKind::ReduceLogSum})
    cs.add(op, "beyond f32").in(val(big)).in(cst(vec<int64_t>({1}))).tol(DType::f32, {1e-6, 1e-6}).needs({G});
  // Cuvil's CPU kernels for ReduceSum and ReduceMean (kernels/cpu/reduce.cpp).
  struct R {
    Ints shape, axes;
  };
  for (const R& r : {R{{7}, {0}}, R{{3, 33}, {-1}}, R{{2, 5, 1000}, {2}}, R{{2, 5, 1000}, {1}}, R{{2, 5, 1000}, {0}},
                     R{{2, 3, 4, 5}, {2, 3}}, R{{2, 3, 4, 5}, {1, 2}}, R{{4099}, {0}}, R{{2, 3, 700}, {0, 1}},
                     R{{1024, 1024}, {1}}, R{{1024, 1024}, {0}}})
    for (OpKind op : {OpKind::ReduceSum, OpKind::ReduceMean})
      for (int64_t keep : {0, 1})
        cs.add(op, "cpu kernel")
            .in(f32(r.shape, -1, 3))
            .in(cst(vec<int64_t>(r.axes)))
            .attr("keepdims", keep)
            .tol(DType::f32, {5e-6, 1e-5})
            .needs({C});
}

void arg_cases(Cases& cs) {
  for (Ints shape : {Ints{1}, Ints{7}, Ints{3, 33}, Ints{4, 5, 6}, Ints{2, 1000}, Ints{17, 9}})
    for (int64_t axis : {int64_t(-1), int64_t(0)})
      for (OpKind op : {OpKind::ArgMax, OpKind::ArgMin})
        for (int64_t last : {0, 1}) {
          // (An integer result of at most 8 elements is shape arithmetic, which fusion leaves alone.)
          int64_t results = 1;
          for (size_t d = 0; d < shape.size(); ++d)
            if (int64_t(d) != (axis + int64_t(shape.size())) % int64_t(shape.size())) results *= shape[d];
          cs.add(op, "ties, specials").in(f32(shape).sp().ties(0.5)).attr("axis", axis).attr("select_last_index", last)
              .needs(results > 8 ? std::set<Backend>{G} : std::set<Backend>{});
          cs.add(op, "i32, keepdims 0").in(rnd(DType::i32, shape)).attr("axis", axis).attr("keepdims", int64_t(0))
              .attr("select_last_index", last);
          cs.add(op, "bf16").in(rnd(DType::bf16, shape).ties(0.25)).attr("axis", axis).attr("select_last_index", last);
        }
  for (Ints shape : {Ints{1}, Ints{3, 33}, Ints{4, 5, 6}})
    for (int64_t axis : {int64_t(-1), int64_t(0)})
      cs.add(OpKind::Hardmax, "ties").in(f32(shape).sp().ties(0.5)).attr("axis", axis).needs({G});
  cs.add(OpKind::Hardmax, "f64").in(rnd(DType::f64, {3, 9}));
}

void softmax_cases(Cases& cs) {
  // LogSoftmax near 0 (a row's largest value) is a difference of logs: 1e-6 absolute there.
  Tol t{1e-5, 1e-6};
  for (OpKind op : {OpKind::Softmax, OpKind::LogSoftmax}) {
    for (Ints s : {Ints{1}, Ints{7}, Ints{4099}, Ints{3, 33}, Ints{2, 5, 1000}, Ints{3, 1, 7, 5}, Ints{2, 300, 3}}) {
      int64_t r = int64_t(s.size());
      for (int64_t axis = -r; axis < r; ++axis)
        for (double scale : {1.0, 30.0})
          cs.add(op, "axis " + std::to_string(axis)).in(f32(s, -scale, scale)).attr("axis", axis).tol(DType::f32, t)
              .needs({C});
    }
    // Rows: ordinary; one NaN; one +inf; all -inf; huge magnitudes; one -inf among finite values.
    Tensor special = tensor<float>({1, 2, 3, 4, 1, NAN, 3, 4, 1, INFINITY, 3, 4, -INFINITY, -INFINITY, -INFINITY,
                                    -INFINITY, 1e30f, -1e30f, 1e30f, 3, -INFINITY, 0, 1, 2},
                                   {6, 4});
    cs.add(op, "special rows").in(val(special)).attr("axis", int64_t(-1)).tol(DType::f32, t).needs({C, G});
    cs.add(op, "special columns").in(val(special)).attr("axis", int64_t(0)).tol(DType::f32, t).needs({C});
    cs.add(op, "large, threaded").in(f32({1024, 1024}, -10, 10)).tol(DType::f32, t).needs({C, G});
    cs.add(op, "generated rows").in(f32({4, 1000})).tol(DType::f32, {1e-6, 1e-6}).needs({G});
    cs.add(op, "f64").in(rnd(DType::f64, {3, 17}).sp());
    cs.add(op, "f16").in(rnd(DType::f16, {3, 17}));
    cs.add(op, "empty").in(f32({0, 5}));
    cs.add(op, "non-contiguous view").in(f32({5, 9}).view()).tol(DType::f32, t);
  }
}

void scan_select_cases(Cases& cs) {
  struct S {
    Ints shape;
    int64_t axis;
  };
  for (const S& s : {S{{37}, 0}, S{{3, 50}, 1}, S{{40, 3}, 0}, S{{2, 3, 33}, -1}, S{{2, 17, 5}, 1}})
    for (int64_t exclusive : {0, 1})
      for (int64_t reverse : {0, 1}) {
        std::string what = "axis " + std::to_string(s.axis) + (exclusive ? " exclusive" : "") + (reverse ? " reverse" : "");
        cs.add(OpKind::CumSum, what).in(f32(s.shape)).in(cst(vec<int64_t>({s.axis}))).attr("exclusive", exclusive)
            .attr("reverse", reverse).tol(DType::f32, {1e-6, 1e-6}).needs({G});
        cs.add(OpKind::CumSum, what + ", i64").in(i64(s.shape)).in(cst(vec<int64_t>({s.axis}))).attr("exclusive", exclusive)
            .attr("reverse", reverse);
        cs.add(OpKind::CumSum, what + ", f64").in(rnd(DType::f64, s.shape)).in(cst(vec<int64_t>({s.axis})))
            .attr("exclusive", exclusive).attr("reverse", reverse).tol(DType::f64, {1e-13, 1e-13});
      }
  cs.add(OpKind::CumSum, "runtime axis").in(f32({3, 9})).in(val(scalar<int32_t>(1))).tol(DType::f32, {1e-6, 1e-6});
  // CumProd: values near 1 keep the products finite; i32 wraps like the type itself; an empty axis.
  for (int64_t exclusive : {0, 1})
    for (int64_t reverse : {0, 1}) {
      std::string what = std::string(exclusive ? "exclusive" : "inclusive") + (reverse ? " reverse" : "");
      cs.add(OpKind::CumProd, what).in(f32({5, 7, 3}, 0.5, 1.5)).in(cst(vec<int64_t>({1}))).attr("exclusive", exclusive)
          .attr("reverse", reverse);
      cs.add(OpKind::CumProd, what + ", i32").in(rnd(DType::i32, {3, 17}, -9, 9)).in(cst(scalar<int64_t>(-1)))
          .attr("exclusive", exclusive).attr("reverse", reverse);
    }
  cs.add(OpKind::CumProd, "empty axis").in(f32({4, 0})).in(cst(scalar<int64_t>(1)));

  // TopK: ties (a coarse grid: equal values keep position order), NaN and infinities, every dtype family; K from 1
  // to the whole axis, largest and smallest. Small K generates (a sorting network per lane); the CPU kernel
  // takes any constant K.
  struct T {
    Ints shape;
    int64_t axis;
    std::vector<int64_t> ks;
    bool generated;
  };
  for (const T& t : {T{{3, 37}, -1, {5}, true}, T{{2, 40, 7}, 1, {3}, true}, T{{50, 9}, 0, {1}, true},
                     T{{4, 11}, 1, {11}, true}, T{{2, 3, 33, 4}, 2, {16}, true}, T{{6, 1000}, 1, {8}, true},
                     T{{3, 1000}, -1, {1, 17, 64, 1000}, false}, T{{1, 50000}, 1, {100, 256}, false},
                     T{{4, 300, 9}, 1, {5, 40, 300}, false}, T{{40, 7}, 0, {33, 40}, false},
                     T{{8, 1000, 64}, 1, {32}, false}})
    for (int64_t k : t.ks)
      for (int64_t largest : {1, 0})
        for (DType dt : {DType::f32, DType::i32, DType::f16, DType::u64, DType::f64}) {
          Input x = rnd(dt, t.shape, is_float(dt) ? -3 : 0, is_float(dt) ? 3 : 20).ties(is_float(dt) ? 0.25 : 0);
          if (is_float(dt)) x.sp();
          std::set<Backend> need = {C};
          if (t.generated && k <= 16) need.insert(G);
          cs.add(OpKind::TopK, "K " + std::to_string(k) + (largest ? " largest" : " smallest"))
              .in(x)
              .in(cst(vec<int64_t>({k})))
              .attr("axis", t.axis)
              .attr("largest", largest)
              .outs(2)
              .exact()
              .needs(need);
        }
  cs.add(OpKind::TopK, "K 0").in(f32({4, 9})).in(cst(vec<int64_t>({0}))).outs(2);
  cs.add(OpKind::TopK, "runtime K").in(f32({4, 9}).sp()).in(val(vec<int64_t>({3}))).outs(2).exact();
  cs.add(OpKind::TopK, "unsorted").in(f32({4, 9})).in(cst(vec<int64_t>({3}))).attr("sorted", int64_t(0)).outs(2).exact();
}

void normalization_cases(Cases& cs) {
  Tol t{2e-5, 2e-5};
  // LayerNormalization: Cuvil's CPU kernel and generated rows; parameters broadcast within the normalized dims.
  struct L {
    Ints x;
    int64_t axis;
    Ints scale, bias;  // bias {} : none
  };
  for (const L& l : {L{{1}, -1, {1}, {1}}, L{{7}, 0, {7}, {7}}, L{{2, 3, 768}, -1, {768}, {768}},
                     L{{3, 33}, 1, {33}, {1, 33}}, L{{2, 5, 1000}, -1, {1000}, {}}, L{{2, 3, 4, 5}, 1, {3, 4, 5}, {3, 4, 5}},
                     L{{2, 3, 4, 5}, -2, {1, 5}, {4, 1}}, L{{4099}, 0, {4099}, {4099}}, L{{2, 1, 7}, 0, {1, 1, 7}, {1, 1, 1}}})
    for (bool const_params : {true, false})
      for (double offset : {0.0, 10.0}) {
        OpCase& c = cs.add(OpKind::LayerNormalization, std::string(const_params ? "const" : "runtime") +
                                                           " params, offset " + std::to_string(int(offset)));
        Input sc = f32(l.scale, -2, 2);
        c.in(f32(l.x, offset - 2, offset + 2)).in(const_params ? sc.cst() : sc);
        if (!l.bias.empty()) {
          Input b = f32(l.bias, -2, 2);
          c.in(const_params ? b.cst() : b);
        }
        c.attr("axis", l.axis).attr("epsilon", 1e-5).tol(DType::f32, {1e-5, 1e-5}).needs({C});
      }
  cs.add(OpKind::LayerNormalization, "specials spoil their row only")
      .in(val(tensor<float>({1, NAN, 3, 4, 1, INFINITY, 3, 4, 0, 0, 0, 0, 1e-40f, 0, 0, 0}, {4, 4})))
      .in(f32({4}).cst())
      .in(f32({4}).cst())
      .tol(DType::f32, {1e-5, 1e-5})
      .needs({C, G});
  cs.add(OpKind::LayerNormalization, "large").in(f32({1024, 1024})).in(f32({1024}).cst()).in(f32({1024}).cst())
      .tol(DType::f32, {1e-5, 1e-5}).needs({C, G});
  for (int64_t axis : {int64_t(-1), int64_t(-2)})
    cs.add(OpKind::LayerNormalization, "Mean and InvStdDev, axis " + std::to_string(axis))
        .in(f32({7, 33}))
        .in(f32(axis == -1 ? Ints{33} : Ints{7, 33}))
        .attr("axis", axis)
        .outs(3)
        .tol(DType::f32, t)
        .needs({G});
  cs.add(OpKind::LayerNormalization, "f16").in(rnd(DType::f16, {3, 16})).in(rnd(DType::f16, {16}));

  for (Ints shape : {Ints{2, 3, 5, 7}, Ints{1, 4, 33}, Ints{3, 2, 1}}) {
    Ints c{shape[1]};
    cs.add(OpKind::InstanceNormalization, "runtime params").in(f32(shape)).in(f32(c)).in(f32(c)).attr("epsilon", 1e-5)
        .tol(DType::f32, t).needs({G});
    cs.add(OpKind::BatchNormalization, "inference")
        .in(f32(shape).sp())
        .in(f32(c).cst())
        .in(f32(c).cst())
        .in(f32(c).cst())
        .in(f32(c, 0.1, 2).cst())
        .tol(DType::f32, t)
        .needs({G});
    cs.add(OpKind::MeanVarianceNormalization, "default axes").in(f32(shape.size() == 4 ? shape : Ints{2, 3, 4, 5})).tol(DType::f32, t);
  }
  cs.add(OpKind::BatchNormalization, "training")
      .in(f32({2, 3, 5}))
      .in(f32({3}))
      .in(f32({3}))
      .in(f32({3}))
      .in(f32({3}, 0.1, 2))
      .attr("training_mode", int64_t(1))
      .outs(3)
      .tol(DType::f32, t);
  cs.add(OpKind::MeanVarianceNormalization, "last axis").in(f32({3, 4, 7})).attr("axes", Ints{2}).tol(DType::f32, t);
  for (int64_t size : {1, 3, 4, 5})
    cs.add(OpKind::LRN, "size " + std::to_string(size))
        .in(f32({2, 7, 3, 5}, -20, 20))
        .attr("size", size)
        .attr("alpha", 2e-4)
        .attr("beta", 0.75)
        .attr("bias", 1.5)
        .tol(DType::f32, {2e-6, 2e-6})
        .needs({G});
  cs.add(OpKind::LRN, "specials").in(f32({2, 11, 3, 7}).sp()).attr("size", int64_t(5)).attr("alpha", 0.5)
      .attr("beta", 0.6).attr("bias", 2.0).tol(DType::f32, {2e-6, 2e-6});
  cs.add(OpKind::LRN, "f64").in(rnd(DType::f64, {1, 6, 5, 5})).attr("size", int64_t(3)).tol(DType::f64, {1e-14, 1e-14});
}

// Targets: random classes in [0, classes), fixed so some hit ignore_index.
Tensor targets(Ints shape, int64_t classes, std::optional<int64_t> ignore, uint32_t seed) {
  Tensor t = Tensor::zeros(DType::i64, shape);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<int64_t>()[i] = ignore && i % 5 == 2 ? *ignore : int64_t((uint64_t(i) * 2654435761u + seed) % uint64_t(classes));
  return t;
}

void loss_cases(Cases& cs) {
  uint32_t seed = 1;
  for (Ints shape : {Ints{5, 7}, Ints{3, 6, 4}, Ints{2, 5, 3, 4}, Ints{4, 1}}) {
    Ints tshape = shape;
    tshape.erase(tshape.begin() + 1);
    int64_t classes = shape[1];
    for (const char* red : {"none", "mean", "sum"})
      for (std::optional<int64_t> ignore : {std::optional<int64_t>(), std::optional<int64_t>(0)}) {
        std::string what = std::string(red) + (ignore ? ", ignore_index" : "");
        OpCase& n = cs.add(OpKind::NegativeLogLikelihoodLoss, what).in(f32(shape).sp()).in(val(targets(tshape, classes, ignore, seed++)))
                        .attr("reduction", red).tol(DType::f32, {1e-6, 1e-6});
        if (ignore) n.attr("ignore_index", *ignore);
        if (std::string(red) == "none") n.needs({G});
        OpCase& w = cs.add(OpKind::NegativeLogLikelihoodLoss, what + ", weights").in(f32(shape)).in(val(targets(tshape, classes, ignore, seed++)))
                        .in(f32({classes}, 0, 2)).attr("reduction", red).tol(DType::f32, {1e-6, 1e-6});
        if (ignore) w.attr("ignore_index", *ignore);
        for (size_t outs : {size_t(1), size_t(2)}) {
          OpCase& s = cs.add(OpKind::SoftmaxCrossEntropyLoss, what + (outs == 2 ? ", log_prob" : ""))
                          .in(f32(shape))
                          .in(val(targets(tshape, classes, ignore, seed++)))
                          .attr("reduction", red)
                          .outs(outs)
                          .tol(DType::f32, {1e-5, 1e-6});
          if (ignore) s.attr("ignore_index", *ignore);
        }
      }
  }
  cs.add(OpKind::SoftmaxCrossEntropyLoss, "weights").in(f32({4, 6})).in(val(targets({4}, 6, std::nullopt, 3)))
      .in(f32({6}, 0, 2)).tol(DType::f32, {1e-5, 1e-6});
}

}  // namespace

void add_reduction_cases(Cases& cs) {
  reduce_cases(cs);
  arg_cases(cs);
  softmax_cases(cs);
  scan_select_cases(cs);
  normalization_cases(cs);
  loss_cases(cs);
}

}  // namespace cuvil::optest
