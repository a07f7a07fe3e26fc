// kiln-rpc-server: the standalone device server for boards (no LLVM, no XGBoost, no kiln libraries).
#include "runtime/rpc/rpc_server.h"

int main(int argc, char** argv) { return kiln::rpc::rpc_server_main(argc, argv); }
