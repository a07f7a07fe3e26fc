// The measurement vocabulary: error codes keep TVM's numbers and names, results survive JSON.
#include <gtest/gtest.h>

#include "scheduler/measure/measure.h"

namespace kiln::measure {
namespace {

TEST(MeasureVocabulary, ErrorCodesKeepTheirNumbersAndNames) {
  EXPECT_EQ(static_cast<int>(MeasureError::None), 0);
  EXPECT_EQ(static_cast<int>(MeasureError::WrongAnswer), 5);
  EXPECT_EQ(static_cast<int>(MeasureError::Unknown), 8);
  EXPECT_EQ(static_cast<int>(MeasureError::DeviceLost), 9);  // kiln's own, after TVM's
  for (int i = 0; i <= 9; ++i) {
    const MeasureError e = static_cast<MeasureError>(i);
    EXPECT_EQ(parse_measure_error(measure_error_name(e)), e) << i;
    EXPECT_EQ(measure_error_from_int(i), e);
  }
  EXPECT_STREQ(measure_error_name(MeasureError::CompileHost), "compile-host");
  EXPECT_STREQ(measure_error_name(MeasureError::BuildTimeout), "build-timeout");
  EXPECT_STREQ(measure_error_name(MeasureError::DeviceLost), "device-lost");
  EXPECT_EQ(parse_measure_error("compile_host"), std::nullopt);
  EXPECT_EQ(measure_error_from_int(42), MeasureError::Unknown);
}

TEST(MeasureVocabulary, BuildResultRoundTripsThroughJson) {
  BuildResult r;
  r.so_path = "/tmp/x.so";
  r.func_name = "kiln_program";
  r.buffers = {{"a", 7680, DType::Float32, BufferRole::Input},
               {"y", 10752, DType::Float32, BufferRole::Output},
               {"t", 8, DType::Int64, BufferRole::Temp}};
  r.error = MeasureError::CompileHost;
  r.error_msg = "link: \"quoted\"\nline";
  r.time_s = 0.25;
  const BuildResult back = build_result_from_json(nlohmann::json::parse(to_json(r).dump()));
  EXPECT_EQ(back.so_path, r.so_path);
  EXPECT_EQ(back.func_name, r.func_name);
  ASSERT_EQ(back.buffers.size(), 3u);
  EXPECT_EQ(back.buffers[2].name, "t");
  EXPECT_EQ(back.buffers[2].bytes, 8);
  EXPECT_EQ(back.buffers[2].dtype, DType::Int64);
  EXPECT_EQ(back.buffers[2].role, BufferRole::Temp);
  EXPECT_EQ(back.error, MeasureError::CompileHost);
  EXPECT_EQ(back.error_msg, r.error_msg);
  EXPECT_DOUBLE_EQ(back.time_s, 0.25);
}

TEST(MeasureVocabulary, MeasureResultRoundTripsThroughJson) {
  MeasureResult r{{1e-3, 2e-3}, MeasureError::None, "", 1.5, 1.7e9};
  const MeasureResult back = measure_result_from_json(to_json(r));
  EXPECT_EQ(back.costs, r.costs);
  EXPECT_EQ(back.error, MeasureError::None);
  EXPECT_DOUBLE_EQ(back.all_cost_s, 1.5);
  EXPECT_DOUBLE_EQ(back.timestamp, 1.7e9);
}

TEST(MeasureVocabulary, MalformedJsonNamesTheField) {
  try {
    build_result_from_json(nlohmann::json{{"so_path", "x"}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("func_name"), std::string::npos) << e.what();
  }
  try {
    measure_result_from_json(nlohmann::json{{"costs", "fast"}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("costs"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln::measure
