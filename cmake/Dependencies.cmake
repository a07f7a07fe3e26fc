# Every dependency comes from Debian's packages; scripts/install-deps.sh installs them.
find_package(Protobuf REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(GTest REQUIRED)

# libonnx-dev ships a CMake config, but its exported targets drag in python bits; link the two
# libraries directly with the defines the headers need.
find_library(ONNX_LIB onnx REQUIRED)
find_library(ONNX_PROTO_LIB onnx_proto REQUIRED)
add_library(kiln_onnx_deps INTERFACE)
target_compile_definitions(kiln_onnx_deps INTERFACE ONNX_ML=1 ONNX_NAMESPACE=onnx)
target_link_libraries(kiln_onnx_deps INTERFACE ${ONNX_LIB} ${ONNX_PROTO_LIB} protobuf::libprotobuf)

find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp REQUIRED)
