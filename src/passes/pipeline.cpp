#include "passes/pipeline.h"

namespace cuvil {

bool optimize(Graph& g, int level, PassContext& ctx) {
  if (level <= 0) return false;
  bool changed = false;
  auto step = [&](Pass&& p) { changed |= run_pass(p, g, ctx); };
  // Drop no-op plumbing (Identity, inference Dropout, same-type Cast, ...) so later passes see through it.
  step(SimplifyIdentitiesPass());
  // A QDQ model's QuantizeLinear -> DequantizeLinear pairs become int8 hints on the products they feed, before
  // constant folding turns the weights' DequantizeLinear into f32 weights.
  step(FoldQuantizeDequantizePass());
  // Inference BatchNorm after a Conv becomes part of the Conv's weights: one pass over the activation less.
  step(FoldBatchNormPass());
  // float16 convolutions, products and pools compute in f32 between casts: on the fast kernels.
  step(ComputeHalfInFloatPass());
  // Evaluate what depends only on constants (shape arithmetic, weight preprocessing) once, at compile time.
  step(ConstantFoldingPass());
  // Folding turns computed shapes into constants: Reshapes to the same shape and chains become visible.
  step(SimplifyIdentitiesPass());
  // Merge duplicate nodes and equal constants (frontends emit the same Shape/Gather or weight many times).
  step(CommonSubexpressionEliminationPass());
  // Work that every loop iteration repeats on the same values runs once, before the loop.
  step(HoistLoopInvariantsPass());
  // The fusion passes match chains whose links each have one reader: what the simplifications left unread goes.
  step(DeadCodeEliminationPass());
  // Fusion: GELU and layer-norm chains into Gelu / LayerNormalization; Conv / MatMul / Gemm with their bias, residual Add and activation into one
  // node each, which oneDNN runs with post-ops.
  step(FuseGeluPass());
  step(FuseLayerNormPass());
  // Attention (product, scale, mask, Softmax, product, and the transposes around it) into one node, before the
  // matrix products and the Softmax are claimed one by one below.
  step(FuseAttentionPass());
  step(FuseConvolutionPass());
  step(FuseMatMulPass());
  // A product whose output is only sliced into column ranges (a fused QKV projection) becomes one product per
  // range, writing each part where its readers want it instead of copying it out.
  step(SplitSlicedMatMulPass());
  // Convolutions and pools go channels-last; the transposes this adds cancel between neighbours.
  step(AssignLayoutsPass());
  // Leftover transposes that only move size-1 dims (after global pooling) become reshapes.
  step(SimplifyIdentitiesPass());
  // The classification losses become their loss per element, which generates, and the sums over it.
  step(DecomposeOpsPass());
  // Reductions over scattered axes become chains of reductions over one block each, which generate.
  step(SplitReductionsPass());
  // What remains between the heavy ops (element-wise chains, casts, Softmax, LayerNorm, reductions) becomes
  // generated kernels, one per group, each a single pass over memory where its reductions allow.
  step(FuseElementwisePass());
  // Last: remove everything the rewrites above left without a use.
  step(DeadCodeEliminationPass());
  return changed;
}

}  // namespace cuvil
