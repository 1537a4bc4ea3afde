// Hot weight swap: a model served from immutable weights versions, each a graph with its own pool of executors.
//
// A run leases the current version and one of its executors (a pointer copy under a mutex held for nanoseconds,
// never across a run), so it keeps the weights it started with however many swaps happen meanwhile, and never
// sees a mix. A swap builds the new version completely off the request path — the caller's graph (constants
// replaced, folded and fused again by the caller), then executors planned and prepared for the input shapes the
// model has served (oneDNN primitives, packed weights, generated kernels from the JIT cache), as many as the old
// version had, so no request pays for preparation — and publishes it with one pointer swap. No run waits for a
// swap and no swap waits for a run: an old version is freed when its last lease ends.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "ir/graph.h"
#include "runtime/executor.h"

namespace cuvil {

using InputShapes = std::vector<std::vector<int64_t>>;

// One published set of weights: an immutable graph and the executors prepared on it.
class WeightsVersion {
 public:
  WeightsVersion(uint64_t id, std::shared_ptr<const Graph> graph, ExecutorOptions options);
  uint64_t id() const { return id_; }
  const std::shared_ptr<const Graph>& graph() const { return graph_; }
  const ExecutorOptions& options() const { return options_; }
  // A pooled executor, or a new one. Thread-safe.
  std::unique_ptr<Executor> take();
  void give(std::unique_ptr<Executor> e);
  // Adds `count` executors prepared for each of `shapes` to the pool (the caller's thread does the work).
  void prepare(const std::vector<InputShapes>& shapes, size_t count);
  int64_t executors_created() const;
  // RunStats of the pooled executors (those not running now).
  std::vector<RunStats> pooled_stats() const;

 private:
  const uint64_t id_;
  const std::shared_ptr<const Graph> graph_;
  const ExecutorOptions options_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Executor>> pool_;
  int64_t created_ = 0;
};

class VersionedModel {
 public:
  // Version 1 is `graph` (shape-inferred, verified).
  VersionedModel(std::shared_ptr<const Graph> graph, ExecutorOptions options);

  // A run's hold on a version and an executor of it; the executor goes back to the version's pool at the end
  // (dropped if the version is no longer current).
  class Lease {
   public:
    Lease(Lease&&) = default;
    ~Lease();
    Executor& executor() { return *exec_; }
    const WeightsVersion& version() const { return *version_; }
    uint64_t version_id() const { return version_->id(); }
    // The input shapes this run had: a swap prepares the next version's executors for them.
    void note_shapes(InputShapes shapes) { shapes_ = std::move(shapes); }

   private:
    friend class VersionedModel;
    Lease(VersionedModel* m, std::shared_ptr<WeightsVersion> v);
    VersionedModel* model_;
    std::shared_ptr<WeightsVersion> version_;
    std::unique_ptr<Executor> exec_;
    InputShapes shapes_;
  };
  Lease lease();

  std::shared_ptr<WeightsVersion> current() const;
  uint64_t current_id() const { return current()->id(); }

  // Builds (does not publish) the next version: `graph` must have the current version's inputs and outputs
  // (names and types; InputError otherwise). Executors are prepared here, on the caller's thread.
  std::shared_ptr<WeightsVersion> stage(std::shared_ptr<const Graph> graph);
  // Publishes a staged version. `base`: the version it was staged from (its unchanged weights came from there);
  // when another version was published since, nothing changes and an InputError says so (stage again).
  // 0: publish whatever is current.
  void commit(std::shared_ptr<WeightsVersion> staged, uint64_t base = 0);
  // stage() + commit() from the current version. Returns the new version's id.
  uint64_t swap(std::shared_ptr<const Graph> graph);

  // New executor options (threads, precision) for every later run: the same graph and id, a fresh pool.
  void set_options(ExecutorOptions options);
  // Remembers input shapes to prepare (every later version is prepared for them too), and prepares an executor
  // of the current version for them now.
  void prepare(const InputShapes& shapes);
  // Input shape signatures a swap prepares for (those prepared, then the most recent ones run; at most 4).
  std::vector<InputShapes> known_shapes() const;

 private:
  void returned(std::shared_ptr<WeightsVersion>& v, std::unique_ptr<Executor>& e, InputShapes& shapes);
  void remember(InputShapes shapes);  // under mu_

  mutable std::mutex mu_;  // guards the fields below; held only to copy or swap them
  std::shared_ptr<WeightsVersion> current_;
  uint64_t next_id_ = 2;
  std::vector<InputShapes> shapes_;
  std::mutex stage_mu_;  // one stage at a time (runs never take it)
};

}  // namespace cuvil
