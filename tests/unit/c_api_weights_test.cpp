// The C API's hot weight swap: cuvil_weights_stage / cuvil_weights_commit, versions reported per run, every bad
// stage answered with a code and nothing changed, and runs from 8 threads while weights are committed 100 times
// (ThreadSafetyCApiWeightSwap.OneThreadEach*: under ThreadSanitizer in CI).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <map>
#include <thread>

#include "artifact/artifact.h"
#include "cuvil/cuvil.h"
#include "test_util.h"

namespace cuvil {
namespace {

// x[2, 3] -> MatMul(W[3, 4]) -> Add(b[4]) -> Relu, with the weights of set k.
std::vector<float> w_of(int k) {
  std::vector<float> w(12);
  for (int i = 0; i < 12; ++i) w[size_t(i)] = float((i * 7 + k * 5) % 11) / 4.f - 1.f;
  return w;
}
std::vector<float> b_of(int k) { return {0.25f * float(k), -0.5f, 1.f - 0.125f * float(k), 0.f}; }

std::string model_text(const std::vector<float>& w, const std::vector<float>& b) {
  auto list = [](const std::vector<float>& v) {
    std::string s;
    char buf[64];
    for (size_t i = 0; i < v.size(); ++i) {
      std::snprintf(buf, sizeof buf, "%s%.9g", i ? ", " : "", double(v[i]));
      s += buf;
      if (std::string(buf).find_first_of(".e") == std::string::npos) s += ".0";
    }
    return s;
  };
  return "graph @main(%x: f32[2, 3]) {\n  %W: f32[3, 4] = constant [" + list(w) + "]\n  %b: f32[4] = constant [" +
         list(b) + "]\n  %m: f32[2, 4] = MatMul(%x, %W)\n  %a: f32[2, 4] = Add(%m, %b)\n  %y: f32[2, 4] = Relu(%a)\n"
         "  return %y\n}\n";
}

std::string artifact_for(int k) {
  artifact::SaveInput in;
  in.graph = test::parse_checked(model_text(w_of(k), b_of(k)));
  return artifact::serialize(in);
}

struct Session {
  cuvil_session* s = nullptr;
  ~Session() { cuvil_session_free(s); }
};

cuvil_session* open(const std::string& bytes) {
  cuvil_session_options o = CUVIL_SESSION_OPTIONS_INIT;
  o.threads = 1;
  return cuvil_session_create_from_memory(bytes.data(), bytes.size(), &o, nullptr);
}

const float kX[6] = {1, -2, 0.5f, 3, 0.25f, -1};

std::vector<float> run(cuvil_session* s, uint64_t* version = nullptr) {
  int64_t xd[2] = {2, 3}, yd[2] = {2, 4};
  std::vector<float> y(8, -99.f);
  cuvil_tensor in = CUVIL_TENSOR_INIT, out = CUVIL_TENSOR_INIT;
  in.rank = 2, in.dims = xd, in.data = const_cast<float*>(kX), in.bytes = sizeof kX;
  out.rank = 2, out.dims = yd, out.data = y.data(), out.bytes = y.size() * sizeof(float);
  if (cuvil_session_run_versioned(s, &in, 1, &out, 1, version, nullptr) != CUVIL_OK) return {};
  return y;
}

// Stages set k's weights (all, or only b with CUVIL_WEIGHTS_SUBSET).
cuvil_code stage(cuvil_session* s, int k, uint32_t flags, cuvil_weights** w, cuvil_status** st = nullptr) {
  std::vector<float> W = w_of(k), b = b_of(k);
  int64_t wd[2] = {3, 4}, bd[1] = {4};
  cuvil_tensor t[2] = {CUVIL_TENSOR_INIT, CUVIL_TENSOR_INIT};
  t[0].rank = 2, t[0].dims = wd, t[0].data = W.data(), t[0].bytes = W.size() * sizeof(float);
  t[1].rank = 1, t[1].dims = bd, t[1].data = b.data(), t[1].bytes = b.size() * sizeof(float);
  const char* names[2] = {"W", "b"};
  if (flags & CUVIL_WEIGHTS_SUBSET) return cuvil_weights_stage(s, names + 1, t + 1, 1, flags, w, st);
  return cuvil_weights_stage(s, names, t, 2, flags, w, st);
}

TEST(CApiWeights, StageCommitAndVersions) {
  Session s{open(artifact_for(0))};
  ASSERT_NE(s.s, nullptr);
  Session ref1{open(artifact_for(1))};
  ASSERT_EQ(cuvil_session_weight_count(s.s), 2u);
  EXPECT_STREQ(cuvil_session_weight_name(s.s, 0), "W");
  EXPECT_STREQ(cuvil_session_weight_name(s.s, 1), "b");
  EXPECT_EQ(cuvil_session_weight_name(s.s, 2), nullptr);
  EXPECT_EQ(cuvil_session_weights_version(s.s), 1u);
  std::vector<float> y0 = run(s.s), y1 = run(ref1.s);
  ASSERT_EQ(y0.size(), 8u);
  ASSERT_NE(y0, y1);

  cuvil_weights* w = nullptr;
  cuvil_status* st = nullptr;
  ASSERT_EQ(stage(s.s, 1, 0, &w, &st), CUVIL_OK) << cuvil_status_message(st);
  EXPECT_EQ(run(s.s), y0);  // staged, not serving
  uint64_t v = 0;
  ASSERT_EQ(cuvil_weights_commit(s.s, w, &v, &st), CUVIL_OK) << cuvil_status_message(st);
  EXPECT_EQ(v, 2u);
  EXPECT_EQ(cuvil_weights_version(w), 2u);
  uint64_t ran = 0;
  EXPECT_EQ(run(s.s, &ran), y1);  // bit for bit a session made with these weights
  EXPECT_EQ(ran, 2u);
  // Committing it again: stale.
  EXPECT_EQ(cuvil_weights_commit(s.s, w, &v, nullptr), CUVIL_WEIGHTS_MISMATCH);
  cuvil_weights_free(w);
  EXPECT_EQ(run(s.s), y1);  // the committed version lives on in the session

  // A subset: b of set 0 over W of set 1.
  ASSERT_EQ(stage(s.s, 0, CUVIL_WEIGHTS_SUBSET, &w), CUVIL_OK);
  ASSERT_EQ(cuvil_weights_commit(s.s, w, nullptr, nullptr), CUVIL_OK);
  cuvil_weights_free(w);
  Session mixed{[] {
    artifact::SaveInput in;
    in.graph = test::parse_checked(model_text(w_of(1), b_of(0)));
    std::string bytes = artifact::serialize(in);
    return open(bytes);
  }()};
  EXPECT_EQ(run(s.s, &ran), run(mixed.s));
  EXPECT_EQ(ran, 3u);
  // Two stages from version 3: the first commit wins, the second is stale.
  cuvil_weights *a = nullptr, *b = nullptr;
  ASSERT_EQ(stage(s.s, 2, 0, &a), CUVIL_OK);
  ASSERT_EQ(stage(s.s, 3, 0, &b), CUVIL_OK);
  EXPECT_EQ(cuvil_weights_commit(s.s, a, nullptr, nullptr), CUVIL_OK);
  EXPECT_EQ(cuvil_weights_commit(s.s, b, nullptr, &st), CUVIL_WEIGHTS_MISMATCH);
  EXPECT_NE(std::string(cuvil_status_message(st)).find("stage them again"), std::string::npos);
  cuvil_status_free(st);
  cuvil_weights_free(a);
  cuvil_weights_free(b);
}

TEST(CApiWeights, BadStagesChangeNothing) {
  Session s{open(artifact_for(0))};
  ASSERT_NE(s.s, nullptr);
  std::vector<float> y0 = run(s.s);
  float data[12] = {};
  int64_t d4[1] = {4}, d5[1] = {5};
  cuvil_tensor t = CUVIL_TENSOR_INIT;
  t.rank = 1, t.dims = d4, t.data = data, t.bytes = sizeof data;
  cuvil_weights* w = nullptr;
  cuvil_status* st = nullptr;
  auto expect = [&](const char* name, cuvil_code code, const char* needle, uint32_t flags = CUVIL_WEIGHTS_SUBSET) {
    SCOPED_TRACE(needle);
    const char* names[1] = {name};
    EXPECT_EQ(cuvil_weights_stage(s.s, names, &t, 1, flags, &w, &st), code);
    EXPECT_EQ(w, nullptr);
    ASSERT_NE(st, nullptr);
    EXPECT_NE(std::string(cuvil_status_message(st)).find(needle), std::string::npos) << cuvil_status_message(st);
    cuvil_status_free(st);
    st = nullptr;
  };
  expect("nope", CUVIL_WEIGHTS_MISMATCH, "'nope' is not a weight of this model");
  expect("b", CUVIL_WEIGHTS_MISMATCH, "strict update: missing 'W'", 0);
  t.dims = d5;
  expect("b", CUVIL_WEIGHTS_MISMATCH, "'b' has shape f32[4], given f32[5]");
  t.dims = d4;
  t.dtype = CUVIL_I32;
  expect("b", CUVIL_WEIGHTS_MISMATCH, "'b' is f32, given i32");
  t.dtype = CUVIL_F32;
  t.bytes = 8;
  expect("b", CUVIL_INPUT_MISMATCH, "weight 0: its buffer holds 8 bytes");
  t.bytes = sizeof data;
  expect(nullptr, CUVIL_INVALID_ARGUMENT, "name 0 is null");
  expect("b", CUVIL_INVALID_ARGUMENT, "unknown flags", 8);
  EXPECT_EQ(cuvil_weights_stage(nullptr, nullptr, nullptr, 0, 0, &w, nullptr), CUVIL_INVALID_ARGUMENT);
  EXPECT_EQ(cuvil_weights_commit(s.s, nullptr, nullptr, nullptr), CUVIL_INVALID_ARGUMENT);
  cuvil_weights_free(nullptr);
  EXPECT_EQ(cuvil_weights_version(nullptr), 0u);
  EXPECT_EQ(cuvil_session_weights_version(s.s), 1u);
  EXPECT_EQ(run(s.s), y0);
}

// 8 threads run the session while the main thread stages and commits 100 weight sets (cycling through 4).
// Every output is bit for bit the reference of the set its reported version holds, and of no other set.
TEST(ThreadSafetyCApiWeightSwap, OneThreadEachRunsWhileCommitting) {
  constexpr int kThreads = 8, kSwaps = 100, kSets = 4;
  std::vector<std::vector<float>> refs;
  for (int k = 0; k < kSets; ++k) {
    Session r{open(artifact_for(k))};
    refs.push_back(run(r.s));
  }
  for (int i = 0; i < kSets; ++i)
    for (int j = i + 1; j < kSets; ++j) ASSERT_NE(refs[size_t(i)], refs[size_t(j)]);
  Session s{open(artifact_for(0))};
  ASSERT_NE(s.s, nullptr);
  std::mutex mu;
  std::map<uint64_t, int> set_of{{1, 0}};
  std::atomic<bool> stop{false};
  std::vector<std::string> failures(kThreads);
  std::vector<std::atomic<int>> runs(kThreads);
  std::vector<std::atomic<bool>> ended(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      struct End {
        std::atomic<bool>& e;
        ~End() { e = true; }
      } end{ended[size_t(t)]};
      while (!stop.load()) {
        uint64_t v = 0;
        std::vector<float> y = run(s.s, &v);
        int want;
        {
          std::lock_guard<std::mutex> lock(mu);
          auto it = set_of.find(v);
          want = it == set_of.end() ? -1 : it->second;
        }
        int matches = 0;
        for (const auto& r : refs) matches += y == r;
        if (want < 0 || matches != 1 || y != refs[size_t(want)]) {
          failures[size_t(t)] = "version " + std::to_string(v) + " matched " + std::to_string(matches);
          return;
        }
        ++runs[size_t(t)];
      }
    });
  // Every thread runs before the first swap and after the last (a thread that failed has ended).
  auto each_ran = [&] {
    std::vector<int> seen(kThreads);
    for (int t = 0; t < kThreads; ++t) seen[size_t(t)] = runs[size_t(t)];
    for (int t = 0; t < kThreads; ++t)
      while (runs[size_t(t)] == seen[size_t(t)] && !ended[size_t(t)]) std::this_thread::yield();
  };
  each_ran();
  for (int i = 1; i <= kSwaps; ++i) {
    int k = i % kSets;
    cuvil_weights* w = nullptr;
    cuvil_status* st = nullptr;
    ASSERT_EQ(stage(s.s, k, 0, &w, &st), CUVIL_OK) << cuvil_status_message(st);
    {
      std::lock_guard<std::mutex> lock(mu);
      set_of[cuvil_weights_version(w)] = k;
    }
    ASSERT_EQ(cuvil_weights_commit(s.s, w, nullptr, &st), CUVIL_OK) << cuvil_status_message(st);
    cuvil_weights_free(w);
  }
  each_ran();
  stop = true;
  for (auto& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(failures[size_t(t)], "") << "thread " << t;
    EXPECT_GE(runs[size_t(t)], 2) << "thread " << t;
  }
  EXPECT_EQ(cuvil_session_weights_version(s.s), uint64_t(kSwaps + 1));
}

}  // namespace
}  // namespace cuvil
