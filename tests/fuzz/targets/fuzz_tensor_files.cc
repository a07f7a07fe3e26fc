// libFuzzer target for the tensor files `kiln run --input` and the conformance runner read: the first
// byte picks the reader (even: .npy, odd: a serialized TensorProto), the rest is the file. Any bytes
// must end in a Tensor or a kiln::Error, never in a crash, a hang, a leak or an allocation the file's
// size does not justify.
#include <cstddef>
#include <cstdint>
#include <new>
#include <string>

#include "frontend/ir/error.h"
#include "frontend/onnx/tensor_proto.h"
#include "toolchain/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if (data[0] % 2 == 0)
      kiln::parse_npy(bytes, "fuzz.npy");
    else
      kiln::parse_tensor_file(bytes, "fuzz.pb");
  } catch (const kiln::Error&) {
  } catch (const std::bad_alloc&) {
  }
  return 0;
}
