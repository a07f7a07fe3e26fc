#include "tests/frontend/test_models.h"

#include <random>

namespace kiln::testing {

TempDir::TempDir() {
  std::random_device rd;
  dir_ = std::filesystem::temp_directory_path() / ("kiln-test-" + std::to_string(rd()) + std::to_string(rd()));
  std::filesystem::create_directories(dir_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

ModelBuilder relu_model() {
  ModelBuilder b("relu", 13);
  b.input("x", DType::Float32, Shape{1, 4});
  b.node("Relu", {"x"}, {"y"}, "the_relu");
  b.output("y", DType::Float32, Shape{1, 4});
  return b;
}

}  // namespace kiln::testing
