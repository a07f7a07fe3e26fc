// libFuzzer target for the ONNX importer: any bytes must end in a Graph or a kiln::Error, never in a
// crash, a hang, a leak or an unbounded allocation.
#include <cstddef>
#include <cstdint>
#include <new>
#include <string>

#include "frontend/ir/error.h"
#include "frontend/onnx/onnx_import.h"
#include "frontend/passes/bind_input_shapes.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    kiln::Graph g = kiln::import_onnx_bytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz-input");
    // Bind every symbolic dimension so the binding pass is exercised too.
    kiln::ShapeBindings b;
    for (const auto& [name, dims] : g.declared_input_dims)
      for (const auto& d : dims)
        if (!d.known() && !d.param.empty()) b.dims[d.param] = 1;
    kiln::bind_input_shapes(g, b);
  } catch (const kiln::Error&) {
  } catch (const std::bad_alloc&) {
  }
  return 0;
}
