// The C API (include/cuvil/cuvil.h): sessions from memory, queries, runs into caller-owned buffers, and every
// misuse answered with a code (with or without a status object) instead of a crash.
#include <gtest/gtest.h>

#include "artifact/artifact.h"
#include "cuvil/cuvil.h"
#include "test_util.h"

namespace cuvil {
namespace {

std::string artifact_of(const char* text) {
  artifact::SaveInput in;
  in.graph = test::parse_checked(text);
  return artifact::serialize(in);
}

const char* kModel = R"(graph @main(%x: f32[n, 3]) {
  %w: f32[3] = constant [0.5, 1.0, -2.0]
  %y: f32[n, 3] = Mul(%x, %w) loc("model.py":7)
  %s: i64[2] = constant [3, 2]
  %r: f32[3, 2] = Reshape(%y, %s) loc("reshape_node")
  return %y, %r
}
)";

struct Session {
  cuvil_session* s = nullptr;
  ~Session() { cuvil_session_free(s); }
};

TEST(CApi, RunsIntoCallerBuffersAndAnswersQueries) {
  std::string bytes = artifact_of(kModel);
  cuvil_status* st = nullptr;
  cuvil_session_options o = CUVIL_SESSION_OPTIONS_INIT;
  o.threads = 1;
  Session s{cuvil_session_create_from_memory(bytes.data(), bytes.size(), &o, &st)};
  ASSERT_NE(s.s, nullptr) << cuvil_status_message(st);
  ASSERT_EQ(cuvil_session_input_count(s.s), 1u);
  ASSERT_EQ(cuvil_session_output_count(s.s), 2u);
  EXPECT_STREQ(cuvil_session_input_name(s.s, 0), "x");
  EXPECT_EQ(cuvil_session_input_name(s.s, 1), nullptr);
  int64_t dims[4];
  ASSERT_EQ(cuvil_session_input_dims(s.s, 0, dims, 4), 2);
  EXPECT_EQ(dims[0], -1);
  EXPECT_EQ(dims[1], 3);
  EXPECT_EQ(cuvil_session_output_dtype(s.s, 0), CUVIL_F32);

  float x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {}, r[6] = {};
  int64_t xd[2] = {2, 3}, rd[2] = {3, 2};
  cuvil_tensor in = CUVIL_TENSOR_INIT;
  in.rank = 2, in.dims = xd, in.data = x, in.bytes = sizeof x;
  int64_t od[4];
  ASSERT_EQ(cuvil_session_output_shape(s.s, &in, 1, 0, od, 4, &st), 2) << cuvil_status_message(st);
  EXPECT_EQ(od[0], 2);
  cuvil_tensor outs[2] = {CUVIL_TENSOR_INIT, CUVIL_TENSOR_INIT};
  outs[0].rank = 2, outs[0].dims = xd, outs[0].data = y, outs[0].bytes = sizeof y;
  outs[1].rank = 2, outs[1].dims = rd, outs[1].data = r, outs[1].bytes = sizeof r;
  ASSERT_EQ(cuvil_session_run(s.s, &in, 1, outs, 2, &st), CUVIL_OK) << cuvil_status_message(st);
  EXPECT_EQ(st, nullptr);
  EXPECT_EQ(y[0], 0.5f);
  EXPECT_EQ(y[5], -12.0f);
  EXPECT_EQ(r[3], 2.0f);  // y reshaped: [0.5, 2, -6, 2, 5, -12]

  // A wrong output buffer, with and without a status object.
  outs[1].dims = xd;
  EXPECT_EQ(cuvil_session_run(s.s, &in, 1, outs, 2, &st), CUVIL_OUTPUT_MISMATCH);
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(cuvil_status_code(st), CUVIL_OUTPUT_MISMATCH);
  cuvil_status_free(st);
  st = nullptr;
  EXPECT_EQ(cuvil_session_run(s.s, &in, 1, outs, 2, nullptr), CUVIL_OUTPUT_MISMATCH);
  outs[1].dims = rd;
  // A buffer smaller than its dims say.
  outs[0].bytes = 8;
  EXPECT_EQ(cuvil_session_run(s.s, &in, 1, outs, 2, nullptr), CUVIL_OUTPUT_MISMATCH);
  outs[0].bytes = sizeof y;
  in.dtype = CUVIL_I64;
  EXPECT_EQ(cuvil_session_run(s.s, &in, 1, outs, 2, nullptr), CUVIL_INPUT_MISMATCH);
  in.dtype = cuvil_dtype(77);
  EXPECT_EQ(cuvil_session_run(s.s, &in, 1, outs, 2, nullptr), CUVIL_INVALID_ARGUMENT);
  in.dtype = CUVIL_F32;
  EXPECT_EQ(cuvil_session_run(s.s, &in, 1, outs, 1, nullptr), CUVIL_INVALID_ARGUMENT);
  EXPECT_EQ(cuvil_session_run(nullptr, &in, 1, outs, 2, nullptr), CUVIL_INVALID_ARGUMENT);

  // A node that fails while running: its node and location in the status.
  float x3[9] = {};
  int64_t x3d[2] = {3, 3};
  in.dims = x3d, in.data = x3, in.bytes = sizeof x3;
  float y3[9];
  outs[0].dims = x3d, outs[0].data = y3, outs[0].bytes = sizeof y3;
  EXPECT_EQ(cuvil_session_run(s.s, &in, 1, outs, 2, &st), CUVIL_RUN_FAILED);
  ASSERT_NE(st, nullptr);
  EXPECT_NE(std::string(cuvil_status_message(st)).find("Reshape"), std::string::npos) << cuvil_status_message(st);
  EXPECT_EQ(std::string(cuvil_status_node(st)), "Reshape -> r");
  EXPECT_EQ(std::string(cuvil_status_location(st)), "node 'reshape_node'");
  cuvil_status_free(st);
}

TEST(CApi, RefusesBadArtifactsAndOptions) {
  cuvil_status* st = nullptr;
  EXPECT_EQ(cuvil_session_create_from_memory("nope", 4, nullptr, &st), nullptr);
  EXPECT_EQ(cuvil_status_code(st), CUVIL_INVALID_ARTIFACT);
  EXPECT_NE(std::string(cuvil_status_message(st)).find("not a Cuvil artifact"), std::string::npos);
  cuvil_status_free(st);
  EXPECT_EQ(cuvil_session_create_from_memory(nullptr, 10, nullptr, nullptr), nullptr);
  EXPECT_EQ(cuvil_session_create_from_file(nullptr, nullptr, nullptr), nullptr);
  EXPECT_EQ(cuvil_session_create_from_file("/nonexistent/m.cuv", nullptr, &st), nullptr);
  EXPECT_NE(std::string(cuvil_status_message(st)).find("/nonexistent/m.cuv"), std::string::npos);
  cuvil_status_free(st);
  std::string bytes = artifact_of(kModel);
  cuvil_session_options o = CUVIL_SESSION_OPTIONS_INIT;
  o.struct_size = 2;
  EXPECT_EQ(cuvil_session_create_from_memory(bytes.data(), bytes.size(), &o, nullptr), nullptr);
  EXPECT_EQ(cuvil_dtype_size(CUVIL_F16), 2u);
  EXPECT_EQ(cuvil_dtype_size(cuvil_dtype(-1)), 0u);
}

}  // namespace
}  // namespace cuvil
