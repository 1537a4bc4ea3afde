#include "runtime/versioned_model.h"

#include <algorithm>

#include "support/error.h"

namespace cuvil {

namespace {

// Caps the executors a swap prepares ahead (each holds its own packed weights).
constexpr size_t kMaxPreparedExecutors = 16;
constexpr size_t kMaxKnownShapes = 4;

void check_same_signature(const Graph& was, const Graph& now) {
  auto same = [](const std::vector<Value*>& a, const std::vector<Value*>& b, const char* what) {
    if (a.size() != b.size())
      throw InputError(str_cat("weights not updated: the new graph has ", b.size(), " ", what, ", the model ",
                               a.size()));
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i]->name() != b[i]->name() || a[i]->type() != b[i]->type())
        throw InputError(str_cat("weights not updated: ", what, " ", i, " would change from '", a[i]->name(),
                                 "': ", a[i]->type().str(), " to '", b[i]->name(), "': ", b[i]->type().str()));
  };
  same(was.inputs(), now.inputs(), "inputs");
  same(was.outputs(), now.outputs(), "outputs");
}

}  // namespace

WeightsVersion::WeightsVersion(uint64_t id, std::shared_ptr<const Graph> graph, ExecutorOptions options)
    : id_(id), graph_(std::move(graph)), options_(std::move(options)) {}

std::unique_ptr<Executor> WeightsVersion::take() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!pool_.empty()) {
      std::unique_ptr<Executor> e = std::move(pool_.back());
      pool_.pop_back();
      return e;
    }
    ++created_;
  }
  return std::make_unique<Executor>(graph_, options_);
}

void WeightsVersion::give(std::unique_ptr<Executor> e) {
  std::lock_guard<std::mutex> lock(mu_);
  pool_.push_back(std::move(e));
}

void WeightsVersion::prepare(const std::vector<InputShapes>& shapes, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    auto e = std::make_unique<Executor>(graph_, options_);
    for (const InputShapes& s : shapes) e->prepare(s);
    std::lock_guard<std::mutex> lock(mu_);
    ++created_;
    pool_.push_back(std::move(e));
  }
}

int64_t WeightsVersion::executors_created() const {
  std::lock_guard<std::mutex> lock(mu_);
  return created_;
}

std::vector<RunStats> WeightsVersion::pooled_stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RunStats> r;
  for (const auto& e : pool_) r.push_back(e->stats());
  return r;
}

VersionedModel::VersionedModel(std::shared_ptr<const Graph> graph, ExecutorOptions options)
    : current_(std::make_shared<WeightsVersion>(1, std::move(graph), std::move(options))) {}

VersionedModel::Lease::Lease(VersionedModel* m, std::shared_ptr<WeightsVersion> v)
    : model_(m), version_(std::move(v)), exec_(version_->take()) {}

VersionedModel::Lease::~Lease() {
  if (model_ && exec_) model_->returned(version_, exec_, shapes_);
}

VersionedModel::Lease VersionedModel::lease() { return Lease(this, current()); }

std::shared_ptr<WeightsVersion> VersionedModel::current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

void VersionedModel::returned(std::shared_ptr<WeightsVersion>& v, std::unique_ptr<Executor>& e,
                              InputShapes& shapes) {
  bool is_current;
  {
    std::lock_guard<std::mutex> lock(mu_);
    is_current = current_ == v;
    if (!shapes.empty()) remember(std::move(shapes));
  }
  // An executor of a replaced version is dropped here, outside the lock; the version itself goes with its last
  // lease (this one's shared_ptr, when it is the last).
  if (is_current) v->give(std::move(e));
  else e.reset();
}

void VersionedModel::remember(InputShapes shapes) {
  if (!shapes_.empty() && shapes_.back() == shapes) return;  // the steady state: one compare
  auto it = std::find(shapes_.begin(), shapes_.end(), shapes);
  if (it != shapes_.end()) shapes_.erase(it);
  shapes_.push_back(std::move(shapes));
  if (shapes_.size() > kMaxKnownShapes) shapes_.erase(shapes_.begin());
}

std::vector<InputShapes> VersionedModel::known_shapes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return shapes_;
}

std::shared_ptr<WeightsVersion> VersionedModel::stage(std::shared_ptr<const Graph> graph) {
  std::lock_guard<std::mutex> one_stage(stage_mu_);
  std::shared_ptr<WeightsVersion> cur = current();
  check_same_signature(*cur->graph(), *graph);
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_id_++;
  }
  auto v = std::make_shared<WeightsVersion>(id, std::move(graph), cur->options());
  // As many executors as the current version needed at once, each prepared for every shape it served.
  std::vector<InputShapes> shapes = known_shapes();
  size_t count = std::min<size_t>(std::max<int64_t>(cur->executors_created(), 1), kMaxPreparedExecutors);
  if (!shapes.empty()) v->prepare(shapes, count);
  return v;
}

void VersionedModel::commit(std::shared_ptr<WeightsVersion> staged, uint64_t base) {
  CUVIL_CHECK(staged != nullptr, "commit: no staged weights");
  std::shared_ptr<WeightsVersion> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (base != 0 && current_->id() != base)
      throw InputError(str_cat("weights not updated: staged from version ", base, ", but version ",
                               current_->id(), " was published since (stage them again)"));
    old = std::move(current_);
    current_ = std::move(staged);
  }
  // `old` (and its pooled executors) is freed here unless runs still hold it.
}

uint64_t VersionedModel::swap(std::shared_ptr<const Graph> graph) {
  uint64_t base = current_id();
  std::shared_ptr<WeightsVersion> v = stage(std::move(graph));
  uint64_t id = v->id();
  commit(std::move(v), base);
  return id;
}

void VersionedModel::set_options(ExecutorOptions options) {
  std::lock_guard<std::mutex> one_stage(stage_mu_);
  std::shared_ptr<WeightsVersion> cur = current();
  auto v = std::make_shared<WeightsVersion>(cur->id(), cur->graph(), std::move(options));
  std::lock_guard<std::mutex> lock(mu_);
  current_ = std::move(v);
}

void VersionedModel::prepare(const InputShapes& shapes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    remember(shapes);
  }
  Lease l = lease();
  l.executor().prepare(shapes);
}

}  // namespace cuvil
