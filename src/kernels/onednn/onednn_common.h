// What the oneDNN kernels share: the engine, a stream per thread, memory descriptors for Cuvil's dense tensors,
// activations as post-ops, and a base class that binds tensors to pre-built argument lists.
#pragma once

#include <dnnl.hpp>
#include <omp.h>

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/op_schema.h"
#include "ir/ops/activation.h"
#include "kernels/workers.h"
#include "kernels/prepared_kernel.h"

namespace cuvil::onednn {

using dnnl::memory;
using Dims = memory::dims;

dnnl::engine& cpu_engine();
dnnl::stream& thread_stream();

// A row-major descriptor of `dims` (Cuvil tensors are dense and row-major).
memory::desc dense_md(const Dims& dims, memory::data_type dt);
// Row-major, but the last two dims swapped in memory: the logical [.., K, N] view of a stored [.., N, K].
memory::desc swapped_last2_md(const Dims& dims, memory::data_type dt);
// The dense layout of an activation with `spatial` dims: ncw/nchw/ncdhw, or nwc/nhwc/ndhwc when channels-last.
memory::format_tag activation_tag(size_t spatial, bool channels_last);

// A convolution's geometry as oneDNN's descriptors take it: logical (channels-first) dims of input and output,
// strides, dilations as gaps, and pads, the end pads fitted so that the window count gives the output size. False
// when no pads give it. `w`: the weights' dims [M, C/group, k...].
struct ConvGeometry {
  Dims x, y, strides, dilations, pad_begin, pad_end;
};
bool conv_geometry(const AttrReader& attrs, const std::vector<int64_t>& x, const std::vector<int64_t>& y,
                   const std::vector<int64_t>& w, bool channels_last, ConvGeometry* g);
// oneDNN's data type for a Cuvil dtype, or false when oneDNN kernels do not take it.
bool to_onednn_type(DType t, memory::data_type* out);

// Appends the activation's eltwise post-ops; false when oneDNN has no equivalent.
bool append_activation(dnnl::post_ops& po, const nn::Activation& a);

// Counts a primitive about to be created from `pd` (see primitives_created()) and returns its kernel name,
// "onednn:<implementation>".
std::string primitive_created(const dnnl::primitive_desc_base& pd);

// Below this much work a primitive runs on the calling thread alone: waking a sleeping worker (80-400 us on these
// machines) costs more than it saves (an MLP layer: 0.4 ms a call when its 0.2 MFLOP went to two threads).
inline constexpr double kSingleThreadFlops = 2e6;
// Convolutions between this and kSingleThreadFlops are prepared both ways and run threaded only while the workers
// still spin from the last parallel region (a fork and join ~3 us then, see cpu/workers.h): MobileNetV2's late
// depthwise convolutions (0.7-1.4 MFLOP) made the model 2-4 % faster in four of five alternated runs.
inline constexpr double kSpinningThreadFlops = 2e5;

// Runs `threaded`, or `single`, a single-threaded preparation of the same node, where one thread is better:
// whenever the executor runs on one thread because the machine is loaded (kernels/workers.h, "Threads under
// load": a primitive made for two threads forks two whatever OpenMP's count is then, since oneDNN fixes a
// primitive's parallel split when it is created), and, for small work (`small`), while the workers sleep
// (cpu::workers_spinning()). A twin for large work is made at its first use (`make_single`), so models on an idle
// machine never pay for it; when it cannot be made, `threaded` runs.
class SpinAwareKernel final : public PreparedKernel {
 public:
  using Factory = std::function<std::unique_ptr<PreparedKernel>()>;
  // Small work: both made now; `single` also runs while the workers sleep.
  SpinAwareKernel(std::unique_ptr<PreparedKernel> threaded, std::unique_ptr<PreparedKernel> single)
      : threaded_(std::move(threaded)), single_(std::move(single)), small_(true) {}
  // Large work: `single` made by `make_single` when the executor first runs this kernel on one thread.
  SpinAwareKernel(std::unique_ptr<PreparedKernel> threaded, Factory make_single)
      : threaded_(std::move(threaded)), make_single_(std::move(make_single)), small_(false) {}
  void run(KernelContext& ctx) override {
    bool one = omp_get_max_threads() == 1 || (small_ && !cpu::workers_spinning());
    if (one && !single_ && make_single_) {
      single_ = make_single_();
      make_single_ = nullptr;  // made, or cannot be: never tried again
    }
    (one && single_ ? single_ : threaded_)->run(ctx);
  }
  std::string impl_name() const override { return threaded_->impl_name(); }

 private:
  std::unique_ptr<PreparedKernel> threaded_, single_;
  Factory make_single_;
  bool small_;
};

// `inputs` for a preparation later (a SpinAwareKernel's twin): constant values point into copies the returned
// holder keeps (tensors share storage, so nothing is copied but handles).
struct HeldInputs {
  std::vector<PrepareInput> inputs;
  std::shared_ptr<std::vector<Tensor>> constants;
};
HeldInputs hold_inputs(const std::vector<PrepareInput>& inputs);

// Sets OpenMP's thread count for the current thread until destroyed (oneDNN sizes its parallel work from it,
// both when a primitive is created and when it runs). threads <= 0: no change.
class ScopedThreads {
 public:
  explicit ScopedThreads(int threads);
  ~ScopedThreads();
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;

 private:
  int saved_ = 0;
};

// A constant tensor (weights, bias) scaled by `scale` and reordered into a primitive's layout.
struct PackedConstant {
  Tensor source;  // held so that its address cannot be reused while this entry is alive (the cache's key)
  memory packed;
  std::shared_ptr<const void> owner;  // the bytes `packed` views when they were provided (prepacked.h)
};

// The constant `t` times `scale`, reordered from the dense layout `from` into `to`; `t` itself when the layouts are
// equal and the scale 1, and a provided image (an artifact's, prepacked.h) when there is one. Packed once per process for
// each (constant, scale, layouts): the kernels that every shape signature prepares for one weight (a new batch
// or sequence length re-creates the primitive, rarely its weight layout) share one copy, so a new shape neither
// re-packs the weights nor holds another copy of them. Entries die with the last kernel that uses them.
std::shared_ptr<const PackedConstant> pack_shared(const Tensor& t, float scale, const memory::desc& from,
                                                  const memory::desc& to);
// Live entries in pack_shared's cache (for tests).
size_t packed_constants_live();

// A copy of the dense constant at `data` (described by `from`, e.g. weights quantized at prepare) in layout `to`
// (a primitive's weights_desc()), owned by the returned memory. The bytes at `data` may go once this returns.
memory reordered_copy(const memory::desc& from, const void* data, const memory::desc& to);

// Attributes for a primitive that runs on whichever thread calls it: the caller passes the scratchpad at
// execution (user mode). oneDNN's default (library mode) keeps one scratchpad per creating thread, so a
// primitive prepared on one thread and run on another wrote through a null or too-small buffer (a Winograd
// convolution prepared on the loading thread and run from a serving thread crashed).
dnnl::primitive_attr thread_safe_attr();

// At least `bytes` of 64-byte aligned scratch owned by the calling thread, for one primitive's execution at a
// time (grown as needed, freed when the thread exits).
void* thread_scratchpad(size_t bytes);
// At least `bytes` of 64-byte aligned memory owned by the calling thread, in one of kThreadBuffers slots apart from
// the scratchpad: for what a kernel fills and reads within one run of its own (Winograd's blocked activations),
// so that every kernel on the thread shares the memory instead of each faulting in buffers of its own. Grown
// (contents lost) when too small; large ones on transparent huge pages.
inline constexpr int kThreadBuffers = 2;
void* thread_buffer(int slot, size_t bytes);

// A reorder created with thread_safe_attr(), executed with the calling thread's scratchpad.
class Reorder {
 public:
  Reorder() = default;
  Reorder(const memory& from, const memory& to);
  void execute(memory& from, memory& to);
  explicit operator bool() const { return bool(prim_); }

 private:
  dnnl::reorder prim_;
  memory::desc scratch_;
};

// bf16 with f32 accumulation (KernelOptions::precision = bf16): whether oneDNN's implementation `impl` (a
// primitive's impl_info_str) really multiplies in bf16 on this machine's bf16 instructions. Without them (older
// CPUs, or oneDNN capped by ONEDNN_MAX_CPU_ISA) bf16 runs on gemm:jit or ref kernels, slower than f32 (measured:
// 0.4x): then false, with `reason` saying so.
bool bf16_dispatch_is_fast(const std::string& impl, std::string* reason);

// A per-call conversion of an f32 activation into bf16 (the source of a bf16 primitive): `from` (f32, bound to
// each call's tensor) reordered into a buffer this object owns, in layout `to` (bf16).
class Bf16Source {
 public:
  Bf16Source() = default;
  Bf16Source(const memory::desc& from, const memory::desc& to);
  // Converts `data` (laid out as `from`) and returns the bf16 memory. Small tensors convert on the calling thread:
  // one more parallel region per layer costs more than their conversion.
  memory& convert(const void* data);
  memory& converted() { return lp_; }

 private:
  memory user_, lp_;
  Reorder reorder_;
  bool single_ = false;
};

// A primitive plus its arguments, built once: run() only points the memories at this call's tensors.
class PrimitiveKernel : public PreparedKernel {
 public:
  std::string impl_name() const override { return name_; }

 protected:
  // Memory objects for each argument; those bound per call have no handle until run().
  std::unordered_map<int, memory> args_;
  dnnl::primitive prim_;
  std::string name_;

  std::vector<std::shared_ptr<const PackedConstant>> keep_alive_;
  int threads_ = 0;  // 1 for small work (see kSingleThreadFlops); 0: the runtime's thread count

  // Called once per primitive created (from a primitive_desc made with thread_safe_attr()): names the kernel,
  // counts the creation and adds the scratchpad argument that execute() points at the thread's scratchpad.
  void set_name(const dnnl::primitive_desc_base& pd);
  // args_ (or a copy of it) with the scratchpad pointed at the calling thread's; for executions outside execute().
  void bind_scratchpad(std::unordered_map<int, memory>& args) const;
  // A constant argument in layout `to`: shared with every other kernel that packed the same constant the same
  // way (see pack_shared), and kept alive as long as this kernel.
  memory packed(const Tensor& t, float scale, const memory::desc& from, const memory::desc& to) {
    keep_alive_.push_back(pack_shared(t, scale, from, to));
    return keep_alive_.back()->packed;
  }
  void bind(int arg, const void* data) { args_.at(arg).set_data_handle(const_cast<void*>(data)); }
  // After a memory object in args_ is replaced once the kernel has run (bind() keeps the objects, so it needs none).
  void arguments_changed() { c_args_.clear(); }
  // Through the C API with the argument list built once (the C++ overload builds a fresh vector on every call);
  // it holds the memory objects' handles, whose data pointers bind() sets.
  void execute() {
    if (c_args_.empty())
      for (auto& [arg, mem] : args_) c_args_.push_back({arg, mem.get()});
    ScopedThreads t(threads_);
    bind_scratchpad(args_);
    dnnl::error::wrap_c_api(dnnl_primitive_execute(prim_.get(), thread_stream().get(), int(c_args_.size()),
                                                   c_args_.data()),
                            "could not execute a primitive");
    if (threads_ != 1) cpu::note_parallel_end();
  }

 private:
  std::vector<dnnl_exec_arg_t> c_args_;
};

}  // namespace cuvil::onednn
