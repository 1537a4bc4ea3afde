// cuvil serve's pure parts: the v2 protocol codec and the dynamic batcher (on a fake model that records its runs).
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>

#include "serving/batcher.h"
#include "serving/model_repository.h"
#include "serving/protocol.h"

using namespace cuvil;
using namespace cuvil::serving;

namespace {

int status_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ProtocolError& e) {
    return e.status();
  }
  return 0;
}

TEST(ServingProtocol, ParsesNestedJsonInEveryDatatype) {
  InferRequest r = parse_infer_request(
      R"({"id":"a","inputs":[
          {"name":"f","datatype":"FP32","shape":[2,2],"data":[[1,2.5],[3,-4]]},
          {"name":"b","datatype":"BOOL","shape":[3],"data":[true,false,true]},
          {"name":"u","datatype":"UINT64","shape":[1],"data":[18446744073709551615]},
          {"name":"i","datatype":"INT8","shape":[2],"data":[-128,127]},
          {"name":"h","datatype":"FP16","shape":[1],"data":[0.5]},
          {"name":"z","datatype":"BF16","shape":[1],"data":[-2]}],
          "outputs":[{"name":"o","parameters":{"binary_data":true}}]})",
      std::nullopt);
  EXPECT_EQ(r.id, "a");
  ASSERT_EQ(r.inputs.size(), 6u);
  EXPECT_EQ(r.inputs[0].shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(r.inputs[0].data<float>()[3], -4.0f);
  EXPECT_EQ(r.inputs[1].data<bool>()[1], false);
  EXPECT_EQ(r.inputs[2].data<uint64_t>()[0], UINT64_MAX);
  EXPECT_EQ(r.inputs[3].data<int8_t>()[0], -128);
  EXPECT_EQ(float(r.inputs[4].data<f16_t>()[0]), 0.5f);
  EXPECT_EQ(float(r.inputs[5].data<bf16_t>()[0]), -2.0f);
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_TRUE(r.outputs[0].binary);
}

TEST(ServingProtocol, RejectsBadJsonTensors) {
  auto parse = [](const std::string& s) { return status_of([&] { parse_infer_request(s, std::nullopt); }); };
  EXPECT_EQ(parse("nope"), 400);
  EXPECT_EQ(parse(R"({"inputs":[{"name":"x","datatype":"UINT8","shape":[1],"data":[-1]}]})"), 400);
  EXPECT_EQ(parse(R"({"inputs":[{"name":"x","datatype":"INT16","shape":[1],"data":[1.5]}]})"), 400);
  EXPECT_EQ(parse(R"({"inputs":[{"name":"x","datatype":"BOOL","shape":[1],"data":[1]}]})"), 400);
  EXPECT_EQ(parse(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2],"data":[1]}]})"), 400);
  EXPECT_EQ(parse(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]},
                                {"name":"x","datatype":"FP32","shape":[1],"data":[1]}]})"), 400);
  EXPECT_EQ(parse(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1099511627776,1099511627776],"data":[]}]})"),
            400);
  EXPECT_EQ(parse(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":)" + std::string(100, '[') +
                  "1" + std::string(100, ']') + "}]}"),
            400);
}

TEST(ServingProtocol, BinaryTensorsRoundTrip) {
  std::string header = R"({"inputs":[{"name":"x","datatype":"INT32","shape":[3],"parameters":{"binary_data_size":12}},
                                     {"name":"y","datatype":"FP64","shape":[1],"parameters":{"binary_data_size":8}}],
                           "parameters":{"binary_data_output":true}})";
  int32_t xs[3] = {1, -2, 3};
  double y = 0.25;
  std::string body = header + std::string(reinterpret_cast<char*>(xs), 12) + std::string(reinterpret_cast<char*>(&y), 8);
  InferRequest r = parse_infer_request(body, header.size());
  EXPECT_EQ(r.inputs[0].data<int32_t>()[1], -2);
  EXPECT_EQ(r.inputs[1].data<double>()[0], 0.25);
  EXPECT_TRUE(r.binary_default);
  // Short or long bodies and sizes that disagree with the shape are errors.
  EXPECT_EQ(status_of([&] { parse_infer_request(body.substr(0, body.size() - 1), header.size()); }), 400);
  EXPECT_EQ(status_of([&] { parse_infer_request(body + "x", header.size()); }), 400);
  EXPECT_EQ(status_of([&] { parse_infer_request(body, std::nullopt); }), 400);

  std::vector<TensorSpec> specs = {{"out", DType::i32, true, {3}}, {"j", DType::f32, true, {1}}};
  InferRequest want;
  want.outputs = {{"out", true}, {"j", false}};
  EncodedResponse e =
      encode_infer_response("m", "1", want, specs, {r.inputs[0], Tensor::from_vector<float>({1.5f}, {1})});
  ASSERT_TRUE(e.header_length);
  EXPECT_NE(e.body.find(R"("data":[1.5])"), std::string::npos) << e.body;
  EXPECT_NE(e.body.find(R"("binary_data_size":12)"), std::string::npos) << e.body;
  ASSERT_EQ(e.body.size(), *e.header_length + 12);
  EXPECT_EQ(std::memcmp(e.body.data() + *e.header_length, xs, 12), 0);
}

// Mutated requests (bytes flipped, cut, duplicated; header lengths off) are ProtocolErrors or parse; never a crash.
TEST(ServingProtocol, MutatedRequestsNeverCrash) {
  std::string header = R"({"id":"x","inputs":[{"name":"a","datatype":"FP32","shape":[2,2],"data":[[1,2],[3,4]]},)"
                       R"({"name":"b","datatype":"INT64","shape":[1],"parameters":{"binary_data_size":8}}],)"
                       R"("outputs":[{"name":"y","parameters":{"binary_data":true}}]})";
  std::string body = header + std::string(8, '\x01');
  std::mt19937 rng(42);
  int parsed = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string b = body;
    size_t hlen = header.size();
    for (int k = 0, n = 1 + int(rng() % 4); k < n; ++k) {
      size_t at = rng() % b.size();
      switch (rng() % 5) {
        case 0: b[at] = char(rng()); break;
        case 1: b.erase(at, 1 + rng() % 8); break;
        case 2: b.insert(at, b.substr(at, 1 + rng() % 16)); break;
        case 3: b[at] = "[]{}\",:0-9e"[rng() % 11]; break;
        case 4: hlen = rng() % (b.size() + 8); break;
      }
      if (b.empty()) b = "{";
    }
    try {
      InferRequest r = parse_infer_request(b, rng() % 8 ? std::optional<size_t>(hlen) : std::nullopt);
      ++parsed;
      for (const Tensor& t : r.inputs) EXPECT_EQ(int64_t(t.nbytes()), t.numel() * int64_t(dtype_size(t.dtype())));
    } catch (const ProtocolError& e) {
      EXPECT_EQ(e.status(), 400);
    }
  }
  EXPECT_GT(parsed, 0);
}

TEST(ServingProtocol, BindChecksTheSignature) {
  std::vector<TensorSpec> specs = {{"a", DType::f32, true, {-1, 4}}, {"b", DType::i64, true, {-1}}};
  auto req = [](std::vector<int64_t> a, std::vector<int64_t> b, DType bt = DType::i64) {
    InferRequest r;
    r.input_names = {"b", "a"};
    r.inputs = {Tensor::zeros(bt, b), Tensor::zeros(DType::f32, a)};
    return r;
  };
  auto bound = bind_inputs(req({2, 4}, {2}), specs, 8);
  EXPECT_EQ(bound[0].shape(), (std::vector<int64_t>{2, 4}));  // model order
  EXPECT_EQ(status_of([&] { bind_inputs(req({2, 5}, {2}), specs, 8); }), 400);
  EXPECT_EQ(status_of([&] { bind_inputs(req({2, 4}, {2}, DType::i32), specs, 8); }), 400);
  EXPECT_EQ(status_of([&] { bind_inputs(req({2, 4}, {3}), specs, 8); }), 400);   // batch sizes differ
  EXPECT_EQ(status_of([&] { bind_inputs(req({9, 4}, {9}), specs, 8); }), 400);   // over max_batch_size
  EXPECT_EQ(status_of([&] { bind_inputs(req({0, 4}, {0}), specs, 8); }), 400);
  EXPECT_EQ(bind_inputs(req({0, 4}, {0}), specs, 0).size(), 2u);                  // unbatched: any size
}

// Doubles its one input; records the batch sizes it ran.
class FakeModel : public ServedModel {
 public:
  std::vector<TensorSpec> in{{"x", DType::f32, true, {-1, -1}}}, out{{"y", DType::f32, true, {-1, -1}}};
  std::mutex mu;
  std::vector<int64_t> runs;
  std::chrono::milliseconds delay{0};  // each run's duration
  const std::vector<TensorSpec>& inputs() const override { return in; }
  const std::vector<TensorSpec>& outputs() const override { return out; }
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) override {
    {
      std::lock_guard l(mu);
      runs.push_back(inputs[0].dim(0));
    }
    std::this_thread::sleep_for(delay);
    Tensor y = inputs[0].clone();
    for (int64_t i = 0; i < y.numel(); ++i) y.data<float>()[i] *= 2;
    return {y};
  }
};

Tensor rows(int64_t n, int64_t width, float first) {
  Tensor t = Tensor::zeros(DType::f32, {n, width});
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = first + float(i);
  return t;
}

TEST(ServingBatcher, BatchesBySignatureAndSplitsBack) {
  auto model = std::make_shared<FakeModel>();
  BatcherOptions o;
  o.max_batch_size = 4;
  o.max_queue_delay = std::chrono::seconds(60);  // batches close only when full (or at drain)
  DynamicBatcher b(model, o, nullptr);
  std::vector<std::shared_ptr<BatchJob>> jobs;
  std::vector<Tensor> sent;
  for (int i = 0; i < 6; ++i) {
    sent.push_back(rows(i < 4 ? 1 + i % 2 : 2, i < 4 ? 3 : 5, float(10 * i)));  // rows 1,2,1,2 of width 3
    jobs.push_back(b.submit({sent.back()}));
  }
  // Width 3: 1+2+1 = 4 rows close a batch; the fourth (2 rows) waits. Width 5: 2+2 rows close one.
  for (int i : {0, 1, 2, 4, 5}) {
    ASSERT_TRUE(jobs[i]->wait(std::chrono::seconds(30)));
    const Tensor& y = jobs[i]->outputs()[0];
    ASSERT_EQ(y.shape(), sent[i].shape());
    for (int64_t k = 0; k < y.numel(); ++k) EXPECT_EQ(y.data<float>()[k], 2 * sent[i].data<float>()[k]);
  }
  b.drain();  // the waiting one runs now
  ASSERT_TRUE(jobs[3]->wait(std::chrono::seconds(0)));
  EXPECT_EQ(jobs[3]->outputs()[0].dim(0), 2);
  std::lock_guard l(model->mu);
  std::vector<int64_t> runs = model->runs;
  std::sort(runs.begin(), runs.end());
  EXPECT_EQ(runs, (std::vector<int64_t>{2, 4, 4}));
  EXPECT_EQ(status_of([&] { b.submit({rows(1, 3, 0)}); }), 503);  // stopped
}

TEST(ServingBatcher, FullQueueRejectsAndTimedOutJobsAreSkipped) {
  auto model = std::make_shared<FakeModel>();
  BatcherOptions o;
  o.max_batch_size = 16;
  o.max_queue_delay = std::chrono::seconds(60);
  o.max_queue_size = 2;
  DynamicBatcher b(model, o, nullptr);
  auto j1 = b.submit({rows(1, 2, 0)});
  auto j2 = b.submit({rows(1, 2, 0)});
  EXPECT_EQ(status_of([&] { b.submit({rows(1, 2, 0)}); }), 503);
  EXPECT_FALSE(j1->wait(std::chrono::milliseconds(1)));  // gives up: never runs
  b.drain();
  EXPECT_TRUE(j2->wait(std::chrono::seconds(0)));
  std::lock_guard l(model->mu);
  EXPECT_EQ(model->runs, (std::vector<int64_t>{1}));
}

TEST(ServingBatcher, IdleRequestsRunOnTheCallersThread) {
  for (int64_t max_batch : {0, 4}) {  // no batching, or batching without a queue delay
    auto model = std::make_shared<FakeModel>();
    BatcherOptions o;
    o.max_batch_size = max_batch;
    DynamicBatcher b(model, o, nullptr);
    auto job = b.submit({rows(2, 3, 1)});
    ASSERT_TRUE(job->wait(std::chrono::seconds(0)));  // done when submit returns
    EXPECT_EQ(job->outputs()[0].data<float>()[5], 12.0f);
    // Many threads at once: every request answered (inline or queued behind a busy instance).
    std::vector<std::thread> threads;
    std::atomic<int> ok{0};
    for (int t = 0; t < 8; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < 50; ++i) {
          Tensor x = rows(1, 2, float(t * 100 + i));
          auto j = b.submit({x});
          if (j->wait(std::chrono::seconds(60)) && j->outputs()[0].data<float>()[1] == 2 * (x.data<float>()[1]))
            ++ok;
        }
      });
    for (auto& t : threads) t.join();
    EXPECT_EQ(ok.load(), 400);
  }
}

// Eager batching (no queue delay): requests that arrive while a run is in progress form the next batch.
TEST(ServingBatcher, EagerBatchesFormWhileBusy) {
  auto model = std::make_shared<FakeModel>();
  model->delay = std::chrono::milliseconds(200);
  BatcherOptions o;
  o.max_batch_size = 8;
  DynamicBatcher b(model, o, nullptr);
  std::vector<std::thread> threads;
  for (int t = 0; t < 9; ++t)
    threads.emplace_back([&, t] {
      if (t) std::this_thread::sleep_for(std::chrono::milliseconds(50));  // all arrive during the first run
      auto j = b.submit({rows(1, 2, float(t))});
      EXPECT_TRUE(j->wait(std::chrono::seconds(60)));
    });
  for (auto& t : threads) t.join();
  std::lock_guard l(model->mu);
  EXPECT_EQ(model->runs, (std::vector<int64_t>{1, 8}));
}

TEST(ServingBatcher, ConcatAndSplitRows) {
  Tensor a = rows(1, 2, 0), c = rows(2, 2, 10);
  Tensor cat = concat_rows({&a, &c});
  EXPECT_EQ(cat.shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(cat.data<float>()[2], 10.0f);
  auto parts = split_rows(cat, {1, 2});
  EXPECT_TRUE(parts[0].same_bytes(a));
  EXPECT_TRUE(parts[1].same_bytes(c));
}

TEST(ServingConfig, ParsesAndRejects) {
  ModelConfig c = parse_model_config(R"({"max_batch_size": 8, "max_queue_delay_us": 100, "instances": 2})");
  EXPECT_EQ(c.batcher.max_batch_size, 8);
  EXPECT_EQ(c.batcher.max_queue_delay.count(), 100);
  EXPECT_EQ(c.batcher.workers, 2);
  EXPECT_THROW(parse_model_config(R"({"max_batch": 8})"), Error);
  EXPECT_THROW(parse_model_config(R"({"max_batch_size": -1})"), Error);
  EXPECT_THROW(parse_model_config(R"({"max_batch_size": "8"})"), Error);
  EXPECT_THROW(parse_model_config("[1]"), Error);
  EXPECT_TRUE(parse_model_config(R"({"warmup": true})").warmup);
  EXPECT_FALSE(parse_model_config("{}").warmup);
  EXPECT_THROW(parse_model_config(R"({"warmup": 1})"), Error);
}

}  // namespace

TEST(ServingProtocol, Base64DecodesWhatJsonCarries) {
  EXPECT_EQ(base64_decode(""), "");
  EXPECT_EQ(base64_decode("Zg=="), "f");
  EXPECT_EQ(base64_decode("Zm8="), "fo");
  EXPECT_EQ(base64_decode("Zm9v"), "foo");
  EXPECT_EQ(base64_decode("Zm9vYg"), "foob");  // padding optional
  EXPECT_EQ(base64_decode("AP8/+w=="), std::string("\x00\xff\x3f\xfb", 4));
  for (const char* bad : {"Z", "Zm9v!", "Zm 9v", "Zm9vY"}) EXPECT_THROW(base64_decode(bad), ProtocolError) << bad;
}
