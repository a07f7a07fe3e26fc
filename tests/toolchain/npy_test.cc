#include "toolchain/npy.h"

#include <gtest/gtest.h>

#include <fstream>

#include "frontend/ir/error.h"
#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

TEST(Npy, RoundTripsEveryDtypeAndRank) {
  testing::TempDir dir;
  for (DType t : {DType::Float32, DType::Float64, DType::Float16, DType::Int8, DType::UInt8, DType::Int64, DType::Bool}) {
    for (Shape s : {Shape{}, Shape{5}, Shape{2, 3}, Shape{1, 2, 2}}) {
      Tensor x(t, s);
      for (int64_t i = 0; i < x.size(); ++i) x.set_double(i, static_cast<double>(i % 3) - (t == DType::Bool ? 0 : 1));
      std::string p = dir.path("x.npy");
      save_npy(p, x);
      Tensor y = load_npy(p);
      EXPECT_EQ(y.dtype(), t);
      EXPECT_EQ(y.shape(), s);
      EXPECT_EQ(y.to_doubles(), x.to_doubles());
    }
  }
}

// Bytes as numpy 1.x writes them for np.arange(6, dtype='<i4').reshape(2, 3).
TEST(Npy, ReadsWhatNumpyWrites) {
  testing::TempDir dir;
  std::string header = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }";
  header.append(128 - 10 - header.size() - 1, ' ');  // numpy pads the header to a multiple of 64
  header += '\n';
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' + header;
  for (int32_t v = 0; v < 6; ++v) bytes.append(reinterpret_cast<const char*>(&v), 4);
  std::ofstream(dir.path("a.npy"), std::ios::binary) << bytes;
  Tensor t = load_npy(dir.path("a.npy"));
  EXPECT_EQ(t.dtype(), DType::Int32);
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.to_ints(), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
}

TEST(Npy, RejectsWhatItCannotRead) {
  testing::TempDir dir;
  std::ofstream(dir.path("junk.npy")) << "not numpy at all";
  EXPECT_THROW(load_npy(dir.path("junk.npy")), Error);
  std::string header = "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }\n";
  std::ofstream(dir.path("be.npy"), std::ios::binary)
      << std::string("\x93NUMPY\x01\x00", 8) << static_cast<char>(header.size()) << '\0' << header << "abcd";
  EXPECT_THROW(load_npy(dir.path("be.npy")), Error);  // big-endian
  EXPECT_THROW(load_npy(dir.path("missing.npy")), Error);
}

// A .npy with `shape_text` as its header's shape and `data_bytes` zero bytes after it.
std::string npy_with_shape(const std::string& shape_text, size_t data_bytes) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_text + ", }";
  header.append(128 - 10 - header.size() - 1, ' ');
  header += '\n';
  return std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' + header +
         std::string(data_bytes, '\0');
}

// The header is untrusted text: a shape that is not a tuple of non-negative integers, or whose size
// overflows, is a one-line Error naming the file, never a crash or an allocation of its claimed size.
TEST(Npy, MalformedShapesAreErrorsNamingTheFile) {
  testing::TempDir dir;
  for (const char* shape : {"(1, abc)", "(-3,)", "(2.5,)", "(99999999999999999999,)",
                                  "(4294967296, 4294967296)", "(1, 2x)", "[2, 3]"}) {
    std::ofstream(dir.path("bad.npy"), std::ios::binary) << npy_with_shape(shape, 16);
    try {
      load_npy(dir.path("bad.npy"));
      ADD_FAILURE() << shape << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("bad.npy"), std::string::npos) << e.what();
    }
  }
  std::ofstream(dir.path("ok.npy"), std::ios::binary) << npy_with_shape("(2, 2)", 16);
  EXPECT_EQ(load_npy(dir.path("ok.npy")).shape(), (Shape{2, 2}));
}

}  // namespace
}  // namespace kiln
