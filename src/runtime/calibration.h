// int8 calibration (issue 28): which nodes may run int8, running a graph with extra values exposed, and MinMax
// calibration of their input grids. Python's cuvil.quantize builds its methods (percentile, MSE, the SQNR
// threshold) on the first two; the CLI (`--precision int8 [--calibration DIR]`) uses calibrate_minmax.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "runtime/executor.h"

namespace cuvil {

// The top-level FusedConv / FusedMatMul / MatMul / Gemm nodes with constant weights: what int8 may quantize.
std::vector<Node*> quant_targets(const Graph& g);
// The quant targets that are convolutions adding a residual (input 3, top-level f32): calibrating the residual's
// grid too (quant_sum_scale) lets a residual that no layer reads as X stay u8 (runtime/int8_links.h).
std::vector<Node*> quant_sum_targets(const Graph& g);
// Sets (scale > 0) or clears (0) node n's residual grid. Throws cuvil::Error for a bad grid.
void set_quant_sum_hint(Node& n, double scale, int64_t zero_point);
// Whether any node carries int8 hints (a QDQ model's, or an earlier calibration's).
bool has_quant_hints(const Graph& g);
// Precision "fp32" asked explicitly (cuvil.load_onnx(precision="fp32"), the CLI's --precision fp32): a QDQ model's
// own int8 layers (node precision int8, kernels/qdq_precision.h's kQdqReason) get node precision fp32 (kQdqF32Reason),
// so the model computes its QDQ graph exactly in f32, in its artifact too. Returns how many nodes changed.
int keep_model_int8_in_f32(Graph& g);
// How many nodes are a QDQ model's own int8 layers (run int8 at the default precision).
int count_model_int8(const Graph& g);
// Sets node n's input grid (scale > 0), asks for dynamic per-row quantization (scale -1, products only), or
// clears it (scale 0). Throws cuvil::Error for a bad grid.
void set_quant_hint(Node& n, double scale, int64_t zero_point);
// The u8 grid (scale, zero point) of [lo, hi] widened to hold 0 (so a real 0, such as padding, is exact).
std::pair<double, int64_t> u8_grid(double lo, double hi);

// Runs `g` once on `inputs` with `values` (top-level values of g) as extra outputs, and returns those. Products
// that write graph outputs are lowered too (lower_final_outputs), so each exposed layer runs as it would inside
// the model. At fp32 it is the float model: a QDQ model's own int8 layers run f32 too. The graph's outputs (and
// those layers' marks) are restored before returning; no other executor may use g meanwhile.
std::vector<Tensor> run_with_values(const std::shared_ptr<Graph>& g, ExecutorOptions options,
                                    const std::vector<Tensor>& inputs, const std::vector<Value*>& values);

// MinMax calibration: every target's input range over the samples (each one input list) at fp32 -> its grid.
void calibrate_minmax(const std::shared_ptr<Graph>& g, const ExecutorOptions& options,
                      const std::vector<std::vector<Tensor>>& samples);

}  // namespace cuvil
