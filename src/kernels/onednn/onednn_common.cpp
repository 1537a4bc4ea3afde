#include "kernels/onednn/onednn_common.h"

#include <omp.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <mutex>


#include "ir/ops/layout.h"
#include "ir/ops/nn_window.h"
#include "kernels/onednn/prepacked.h"
#include "support/huge_pages.h"
#include "support/log.h"
#include "support/perf_map.h"

namespace cuvil::onednn {

ScopedThreads::ScopedThreads(int threads) {
  if (threads <= 0) return;
  saved_ = omp_get_max_threads();
  if (saved_ != threads) omp_set_num_threads(threads);
  else saved_ = 0;
}

ScopedThreads::~ScopedThreads() {
  if (saved_ > 0) omp_set_num_threads(saved_);
}

HeldInputs hold_inputs(const std::vector<PrepareInput>& inputs) {
  HeldInputs h{inputs, std::make_shared<std::vector<Tensor>>()};
  for (const PrepareInput& in : inputs)
    if (in.value) h.constants->push_back(*in.value);
  size_t j = 0;
  for (PrepareInput& in : h.inputs)
    if (in.value) in.value = &(*h.constants)[j++];
  return h;
}

dnnl::engine& cpu_engine() {
  static dnnl::engine e = [] {
    // CUVIL_PERF_MAP=1 announces oneDNN's JIT code to perf too (in the same /tmp/perf-<pid>.map), unless the user
    // chose oneDNN's own setting.
    if (perf_map_enabled() && !std::getenv("ONEDNN_JIT_PROFILE") && !std::getenv("DNNL_JIT_PROFILE"))
      dnnl_set_jit_profiling_flags(DNNL_JIT_PROFILE_LINUX_PERFMAP);
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return e;
}

dnnl::stream& thread_stream() {
  // CPU streams execute on the calling thread; one per thread keeps concurrent executors independent.
  thread_local dnnl::stream s(cpu_engine());
  return s;
}

memory::desc dense_md(const Dims& dims, memory::data_type dt) {
  Dims strides(dims.size(), 1);
  for (size_t d = dims.size(); d-- > 1;) strides[d - 1] = strides[d] * std::max<int64_t>(dims[d], 1);
  return memory::desc(dims, dt, strides);
}

memory::desc swapped_last2_md(const Dims& dims, memory::data_type dt) {
  Dims stored = dims;
  size_t r = dims.size();
  std::swap(stored[r - 1], stored[r - 2]);
  Dims strides(r, 1);
  for (size_t d = r; d-- > 1;) strides[d - 1] = strides[d] * std::max<int64_t>(stored[d], 1);
  std::swap(strides[r - 1], strides[r - 2]);
  return memory::desc(dims, dt, strides);
}

memory::format_tag activation_tag(size_t spatial, bool channels_last) {
  using T = memory::format_tag;
  if (spatial == 1) return channels_last ? T::nwc : T::ncw;
  if (spatial == 2) return channels_last ? T::nhwc : T::nchw;
  return channels_last ? T::ndhwc : T::ncdhw;
}

bool conv_geometry(const AttrReader& attrs, const std::vector<int64_t>& x, const std::vector<int64_t>& y,
                   const std::vector<int64_t>& w, bool channels_last, ConvGeometry* g) {
  size_t S = x.size() - 2;
  g->x = channels_last ? Dims(layout::to_channels_first(x)) : Dims(x.begin(), x.end());
  g->y = channels_last ? Dims(layout::to_channels_first(y)) : Dims(y.begin(), y.end());
  nn::Window win = nn::read_window(attrs, S, {});
  for (size_t i = 0; i < S; ++i) {
    int64_t k = w[2 + i], in_i = g->x[2 + i], out_i = g->y[2 + i];
    auto [b, e] = nn::window_pads(win, i, in_i, out_i, k);
    int64_t s = win.strides[i], ek = (k - 1) * win.dilations[i] + 1;
    if ((in_i + b + e - ek) / s + 1 != out_i) e = (out_i - 1) * s + ek - in_i - b;
    if (e < 0) return false;
    g->strides.push_back(s);
    g->dilations.push_back(win.dilations[i] - 1);  // oneDNN counts the gaps
    g->pad_begin.push_back(b);
    g->pad_end.push_back(e);
  }
  return true;
}

bool to_onednn_type(DType t, memory::data_type* out) {
  switch (t) {
    case DType::f32: *out = memory::data_type::f32; return true;
    default: return false;  // bf16/f16 arrive with the precision work; f64 and integers stay on the reference
  }
}

bool append_activation(dnnl::post_ops& po, const nn::Activation& a) {
  using A = dnnl::algorithm;
  switch (a.kind) {
    case nn::Act::None: return true;
    case nn::Act::Relu: po.append_eltwise(1.f, A::eltwise_relu, 0.f, 0.f); return true;
    case nn::Act::LeakyRelu: po.append_eltwise(1.f, A::eltwise_relu, a.alpha, 0.f); return true;
    case nn::Act::Clip: po.append_eltwise(1.f, A::eltwise_clip_v2, a.alpha, a.beta); return true;
    case nn::Act::Sigmoid: po.append_eltwise(1.f, A::eltwise_logistic, 0.f, 0.f); return true;
    case nn::Act::Tanh: po.append_eltwise(1.f, A::eltwise_tanh, 0.f, 0.f); return true;
    case nn::Act::HardSigmoid:
      po.append_eltwise(1.f, A::eltwise_linear, a.alpha, a.beta);
      po.append_eltwise(1.f, A::eltwise_clip_v2, 0.f, 1.f);
      return true;
    case nn::Act::HardSwish: po.append_eltwise(1.f, A::eltwise_hardswish, 0.f, 0.f); return true;
    case nn::Act::Gelu: po.append_eltwise(1.f, A::eltwise_gelu_erf, 0.f, 0.f); return true;
    case nn::Act::GeluTanh: po.append_eltwise(1.f, A::eltwise_gelu_tanh, 0.f, 0.f); return true;
    case nn::Act::Elu: po.append_eltwise(1.f, A::eltwise_elu, a.alpha, 0.f); return true;
  }
  return false;
}

namespace {

std::atomic<int64_t> g_primitives_created{0};

}  // namespace

std::string primitive_created(const dnnl::primitive_desc_base& pd) {
  g_primitives_created.fetch_add(1, std::memory_order_relaxed);
  return "onednn:" + std::string(pd.impl_info_str());
}

void PrimitiveKernel::set_name(const dnnl::primitive_desc_base& pd) {
  CUVIL_ASSERT(pd.get_primitive_attr().get_scratchpad_mode() == dnnl::scratchpad_mode::user,
               "oneDNN primitive ", pd.impl_info_str(), " not created with thread_safe_attr()");
  name_ = primitive_created(pd);
  memory::desc scratch = pd.scratchpad_desc();
  if (scratch.get_size() > 0) args_[DNNL_ARG_SCRATCHPAD] = memory(scratch, cpu_engine(), DNNL_MEMORY_NONE);
  arguments_changed();
}

void PrimitiveKernel::bind_scratchpad(std::unordered_map<int, memory>& args) const {
  auto it = args.find(DNNL_ARG_SCRATCHPAD);
  if (it != args.end()) it->second.set_data_handle(thread_scratchpad(it->second.get_desc().get_size()));
}

dnnl::primitive_attr thread_safe_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

void* thread_scratchpad(size_t bytes) {
  struct Scratch {
    void* data = nullptr;
    size_t size = 0;
    ~Scratch() { std::free(data); }
  };
  thread_local Scratch s;
  if (bytes > s.size) {
    size_t size = (bytes + 63) / 64 * 64;
    void* grown = std::aligned_alloc(64, size);
    if (!grown) throw std::bad_alloc();
    std::free(s.data);
    s.data = grown;
    s.size = size;
  }
  return s.data;
}

void* thread_buffer(int slot, size_t bytes) {
  struct Buffer {
    void* data = nullptr;
    size_t size = 0;
    ~Buffer() { std::free(data); }
  };
  thread_local Buffer b[kThreadBuffers];
  CUVIL_ASSERT(slot >= 0 && slot < kThreadBuffers, "thread buffer ", slot, " of ", kThreadBuffers);
  Buffer& s = b[slot];
  if (bytes > s.size) {
    void* grown = aligned_alloc_huge(bytes);
    std::free(s.data);
    s.data = grown;
    s.size = bytes;
  }
  return s.data;
}

Reorder::Reorder(const memory& from, const memory& to) {
  dnnl::reorder::primitive_desc pd(from, to, thread_safe_attr());
  prim_ = dnnl::reorder(pd);
  scratch_ = pd.scratchpad_desc();
}

void Reorder::execute(memory& from, memory& to) {
  std::unordered_map<int, memory> args{{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
  if (size_t n = scratch_.get_size()) args[DNNL_ARG_SCRATCHPAD] = memory(scratch_, cpu_engine(), thread_scratchpad(n));
  prim_.execute(thread_stream(), args);
}

namespace {

// Below this an f32 -> bf16 conversion (about 10 GB/s on one core) takes a few microseconds: less than waking or
// joining the other threads for it.
constexpr size_t kSingleThreadConvertBytes = size_t(1) << 18;

}  // namespace

bool bf16_dispatch_is_fast(const std::string& impl, std::string* reason) {
  // oneDNN names a jit kernel "<kind>:<isa>": brg:avx512_core_bf16, jit_1x1:avx512_core_bf16, brg:avx512_core_amx.
  // Only the ISA counts: "jit_bf16:avx512_core" is bf16 emulated on AVX-512 (what a CPU without BF16 runs).
  std::string isa = impl.substr(impl.rfind(':') + 1);
  if (isa.find("bf16") != std::string::npos || isa.find("amx") != std::string::npos) return true;
  if (reason) *reason = "bf16 would run onednn:" + impl + ", slower than f32 on this machine";
  return false;
}

Bf16Source::Bf16Source(const memory::desc& from, const memory::desc& to)
    : user_(from, cpu_engine(), DNNL_MEMORY_NONE), lp_(to, cpu_engine()), reorder_(user_, lp_),
      single_(from.get_size() < kSingleThreadConvertBytes) {}

memory& Bf16Source::convert(const void* data) {
  ScopedThreads t(single_ ? 1 : 0);
  user_.set_data_handle(const_cast<void*>(data));
  reorder_.execute(user_, lp_);
  return lp_;
}

int64_t primitives_created() { return g_primitives_created.load(std::memory_order_relaxed); }

namespace {

struct PackKey {
  float scale;
  memory::desc from, to;
  std::weak_ptr<const PackedConstant> entry;
};

struct PackCache {
  std::mutex mu;
  std::unordered_multimap<const void*, PackKey> entries;  // by the source constant's address
  size_t sweep_at = 64;
};

PackCache& pack_cache() {
  static PackCache* c = new PackCache;  // never destroyed: kernels may outlive static destruction order
  return *c;
}

// A descriptor as bytes (prepacked.h): oneDNN builds them from zeroed structs, so equal ones are equal bytes.
std::string desc_bytes(const memory::desc& d) { return std::string(reinterpret_cast<const char*>(&d.data), sizeof d.data); }

void record(const Tensor& t, float scale, const memory::desc& from, const memory::desc& to,
            const std::shared_ptr<const PackedConstant>& p) {
  if (p->owner == nullptr && p->packed.get_data_handle() == t.raw()) return;  // the dense constant: nothing to save
  note_packed({t.raw(), size_t(t.nbytes()), scale, desc_bytes(from), desc_bytes(to), p->packed.get_data_handle(),
               to.get_size()},
              p);
}

}  // namespace

// A constant stored prepacked for another layout than this host's primitive asks for (another ISA, thread count
// or precision chose it): said under CUVIL_LOG=prepack, since it costs a reorder at load.
static void log_other_layout(const Tensor& t, const memory::desc& to) {
  if (!log_enabled("prepack")) return;
  std::string fmt = "blocks";
  if (to.data.format_kind == dnnl_blocked) {
    const dnnl_blocking_desc_t& b = to.data.format_desc.blocking;
    for (int i = 0; i < b.inner_nblks; ++i)
      fmt += " " + std::to_string(b.inner_blks[i]) + char('a' + b.inner_idxs[i]);
  }
  log_line("prepack", "a constant " + t.type_str() + " is stored prepacked in another layout than the one this " +
                          "host's primitive asks for (" + fmt + "; another ISA, thread count or precision): reordered");
}

std::shared_ptr<const PackedConstant> pack_shared(const Tensor& t, float scale, const memory::desc& from,
                                                  const memory::desc& to) {
  PackCache& c = pack_cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto [lo, hi] = c.entries.equal_range(t.raw());
    for (auto it = lo; it != hi; ++it) {
      const PackKey& k = it->second;
      if (k.scale != scale || k.from != from || k.to != to) continue;
      if (auto live = k.entry.lock()) {
        record(t, scale, from, to, live);
        return live;
      }
    }
  }
  // Packed outside the lock: two threads may pack the same constant at once; both results are right.
  auto packed = std::make_shared<PackedConstant>();
  packed->source = t;
  ProvidedPack provided;
  bool other_layout = false;  // stored prepacked, but for another request
  if (scale == 1.f && from == to) {
    // Already in the primitive's layout (a bias): the constant itself, which `source` keeps alive.
    packed->packed = memory(to, cpu_engine(), const_cast<void*>(t.raw()));
    count_packed(PackedHow::dense);
  } else if (find_provided(t.raw(), scale, desc_bytes(from), desc_bytes(to), to.get_size(), &provided,
                           &other_layout)) {
    packed->packed = memory(to, cpu_engine(), const_cast<void*>(provided.data));
    packed->owner = std::move(provided.owner);
    count_packed(PackedHow::provided);
  } else {
    if (other_layout) log_other_layout(t, to);
    Tensor src = t;
    if (scale != 1.f) {
      CUVIL_ASSERT(t.dtype() == DType::f32, "only f32 constants are scaled when packed");
      src = t.clone();
      float* p = src.data<float>();
      for (int64_t i = 0; i < src.numel(); ++i) p[i] *= scale;
    }
    memory user(from, cpu_engine(), const_cast<void*>(src.raw()));
    packed->packed = memory(to, cpu_engine());
    dnnl::reorder(user, packed->packed).execute(thread_stream(), user, packed->packed);
    thread_stream().wait();
    count_packed(PackedHow::reordered);
  }
  record(t, scale, from, to, packed);

  std::lock_guard<std::mutex> lock(c.mu);
  if (c.entries.size() >= c.sweep_at) {
    std::erase_if(c.entries, [](const auto& e) { return e.second.entry.expired(); });
    c.sweep_at = 2 * c.entries.size() + 64;
  }
  c.entries.emplace(t.raw(), PackKey{scale, from, to, packed});
  return packed;
}

size_t packed_constants_live() {
  PackCache& c = pack_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  size_t n = 0;
  for (auto& [p, k] : c.entries) n += !k.entry.expired();
  return n;
}

memory reordered_copy(const memory::desc& from, const void* data, const memory::desc& to) {
  memory user(from, cpu_engine(), const_cast<void*>(data)), copy(to, cpu_engine());
  dnnl::reorder(user, copy).execute(thread_stream(), user, copy);
  thread_stream().wait();
  return copy;
}

}  // namespace cuvil::onednn
