/// \file What a bare-metal package adds for its board (targets with a [bare_metal] table: Cortex-M): a
/// linker script written from the target's memory map and the startup file of runtime/baremetal/. With
/// them and newlib, `kiln run` links a runner that QEMU boots, and firmware without startup code of its
/// own links the model the same way (examples/firmware/cortex-m/).
#pragma once
#include <filesystem>
#include <string>

#include "targets/target.h"

namespace kiln::package {

/// The file names inside a package.
inline constexpr const char kBoardLinkerScript[] = "kiln_board.ld";
inline constexpr const char kBoardStartupSource[] = "kiln_cortex_m_startup.c";

/// A GNU ld script: the vector table, code and read-only data (the weights) in flash; .data loaded from
/// flash into SRAM; .bss, the heap and `memory.stack_bytes` of stack in SRAM. The link fails, naming the
/// region, when the program does not fit.
std::string linker_script_text(const BareMetalMemory& memory, const std::string& target_name);

/// The startup file (vector table, reset handler, semihosting command line), runtime/baremetal/.
const char* startup_source_text();

/// runtime/baremetal/kiln_libm_extras.c compiled with the target's `cc` into `work`: the math functions
/// LLVM calls that newlib lacks (roundevenf on FPv4), for the package's library. Throws Error with the
/// compiler's message when it fails.
std::filesystem::path compile_libm_extras(const std::string& cc, const std::filesystem::path& work);

}  // namespace kiln::package
