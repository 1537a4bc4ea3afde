// What a kernel sees when it runs: its node (for attributes), input tensors, and output tensors that the runtime
// has already allocated at the size shape inference gave. Where inference could not size an output (its size
// depends on data: NonZero, Unique, control flow), the kernel allocates it with allocate_output().
#pragma once

#include <functional>
#include <vector>

#include "ir/op_schema.h"

namespace cuvil {

// Runs a region (nested graph) on the runtime's executor; used by control-flow kernels. Values of enclosing
// graphs that the region uses are taken from the current frame.
class RegionRunner {
 public:
  virtual ~RegionRunner() = default;
  // Runs `region` on `inputs` and puts its results in `outputs` (replacing what it held; a loop passes the same
  // vector every iteration). The results are the caller's to keep, except the first `borrowed`: those the caller
  // only reads, before it runs the region again (a loop's condition), so they may alias a constant.
  virtual void run_region(const Graph& region, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                          size_t borrowed) = 0;
  std::vector<Tensor> run_region(const Graph& region, const std::vector<Tensor>& inputs) {
    std::vector<Tensor> outputs;
    run_region(region, inputs, outputs, 0);
    return outputs;
  }
  // Called by a loop (Loop, Scan) before each iteration, numbered from 0: the runtime checks its run control
  // there (cancellation, time and iteration limits) and throws to stop the run.
  virtual void loop_iteration(const Node& loop, int64_t iteration) {}
};

class KernelContext : public AttrReader {
 public:
  // Borrows `inputs`, which must outlive the context (the executor reuses one vector for every node).
  KernelContext(const Node& n, const std::vector<const Tensor*>& inputs, std::vector<Tensor>* outputs,
                RegionRunner* regions)
      : AttrReader(n), inputs_(&inputs), outputs_(outputs), regions_(regions) {}
  // Keeps a temporary list of inputs.
  KernelContext(const Node& n, std::vector<const Tensor*>&& inputs, std::vector<Tensor>* outputs,
                RegionRunner* regions)
      : AttrReader(n), owned_inputs_(std::move(inputs)), inputs_(&owned_inputs_), outputs_(outputs),
        regions_(regions) {}
  KernelContext(const KernelContext&) = delete;
  KernelContext& operator=(const KernelContext&) = delete;

  const Node& node() const { return node_; }
  size_t num_inputs() const { return inputs_->size(); }
  bool has_input(size_t i) const { return i < inputs_->size() && (*inputs_)[i] != nullptr; }
  const Tensor& input(size_t i) const {
    if (!has_input(i)) error("input ", i, " is required but missing");
    return *(*inputs_)[i];
  }
  size_t num_outputs() const { return outputs_->size(); }
  // An output allocated by the runtime (its shape is final).
  Tensor& output(size_t i) {
    Tensor& t = outputs_->at(i);
    CUVIL_ASSERT(t.defined(), node_.describe(), ": output ", i,
                " has a data-dependent size; the kernel must call allocate_output()");
    return t;
  }
  bool output_allocated(size_t i) const { return outputs_->at(i).defined(); }
  // Allocates an output whose size only the kernel knows.
  Tensor& allocate_output(size_t i, DType dtype, std::vector<int64_t> shape) {
    outputs_->at(i) = Tensor::zeros(dtype, std::move(shape));
    return outputs_->at(i);
  }
  // Hands over an already computed tensor as output i (control flow, pass-through).
  void set_output(size_t i, Tensor t) { outputs_->at(i) = std::move(t); }
  RegionRunner& regions() {
    CUVIL_ASSERT(regions_);
    return *regions_;
  }
  template <class... Args>
  [[noreturn]] void error(const Args&... args) const {
    fail(node_.describe(), ": ", args...);
  }
  // A broken invariant of the kernel's own (InternalError), not a problem with the model or its inputs.
  template <class... Args>
  [[noreturn]] void internal_error(const Args&... args) const {
    fail_internal(node_.describe(), ": ", args...);
  }

 private:
  std::vector<const Tensor*> owned_inputs_;
  const std::vector<const Tensor*>* inputs_;
  std::vector<Tensor>* outputs_;
  RegionRunner* regions_;
};

using KernelFn = void (*)(KernelContext&);

}  // namespace cuvil
