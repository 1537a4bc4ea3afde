#include "codegen/kernel_code.h"

#include <atomic>

namespace cuvil::codegen {

namespace {
std::atomic<KernelCodeSource*> g_compiler{nullptr};
}  // namespace

KernelCodeSource* process_compiler() { return g_compiler.load(std::memory_order_acquire); }
void set_process_compiler(KernelCodeSource* compiler) { g_compiler.store(compiler, std::memory_order_release); }

}  // namespace cuvil::codegen
