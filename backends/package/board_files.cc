#include "backends/package/board_files.h"

#include <fmt/format.h>

#include "backends/package/c_compiler.h"
#include "backends/package/file_io.h"
#include "backends/package/runtime_sources.h"
#include "frontend/ir/error.h"

namespace kiln::package {

std::string linker_script_text(const BareMetalMemory& m, const std::string& target_name) {
  // Sections the toolchain's libraries bring (exception tables, init arrays) are kept: newlib calls the
  // init arrays, and an unplaced section would land at address 0 over the vector table.
  return fmt::format(R"(/* Written by kiln for the target {name}: code and weights in flash, data, heap and stack in SRAM. */
MEMORY
{{
  FLASH (rx) : ORIGIN = {flash_origin:#010x}, LENGTH = {flash_bytes:#x}
  SRAM (rwx) : ORIGIN = {sram_origin:#010x}, LENGTH = {sram_bytes:#x}
}}
ENTRY(kiln_reset_handler)
SECTIONS
{{
  .text : {{
    KEEP(*(.kiln_vectors))
    *(.text .text.*)
    KEEP(*(.init)) KEEP(*(.fini))
    *(.rodata .rodata.*)
    . = ALIGN(8);
  }} > FLASH
  .ARM.extab : {{ *(.ARM.extab* .gnu.linkonce.armextab.*) }} > FLASH
  .ARM.exidx : {{ __exidx_start = .; *(.ARM.exidx* .gnu.linkonce.armexidx.*) __exidx_end = .; }} > FLASH
  .preinit_array : {{ PROVIDE_HIDDEN(__preinit_array_start = .); KEEP(*(.preinit_array)) PROVIDE_HIDDEN(__preinit_array_end = .); }} > FLASH
  .init_array : {{ PROVIDE_HIDDEN(__init_array_start = .); KEEP(*(SORT(.init_array.*))) KEEP(*(.init_array)) PROVIDE_HIDDEN(__init_array_end = .); }} > FLASH
  .fini_array : {{ PROVIDE_HIDDEN(__fini_array_start = .); KEEP(*(.fini_array)) PROVIDE_HIDDEN(__fini_array_end = .); }} > FLASH
  .data : ALIGN(8) {{
    __kiln_data_start = .;
    *(.data .data.*)
    . = ALIGN(8);
    __kiln_data_end = .;
  }} > SRAM AT > FLASH
  __kiln_data_load = LOADADDR(.data);
  .bss (NOLOAD) : ALIGN(8) {{
    __bss_start__ = .;
    *(.bss .bss.*)
    *(COMMON)
    . = ALIGN(8);
    __bss_end__ = .;
  }} > SRAM
  /* The heap (newlib's sbrk) starts at `end` and grows up to the stack. */
  end = .;
  __kiln_stack_top = ORIGIN(SRAM) + LENGTH(SRAM);
  ASSERT(end + {stack_bytes:#x} <= __kiln_stack_top, "kiln: SRAM cannot hold the program's data and {stack_bytes} bytes of stack")
}}
)",
                     fmt::arg("name", target_name), fmt::arg("flash_origin", m.flash_origin),
                     fmt::arg("flash_bytes", m.flash_bytes), fmt::arg("sram_origin", m.sram_origin),
                     fmt::arg("sram_bytes", m.sram_bytes), fmt::arg("stack_bytes", m.stack_bytes));
}

const char* startup_source_text() { return kCortexMStartupC; }

std::filesystem::path compile_libm_extras(const std::string& cc, const std::filesystem::path& work) {
  std::filesystem::create_directories(work);
  const std::filesystem::path src = work / "kiln_libm_extras.c";
  write_file(src, kLibmExtrasC);
  std::string log;
  auto bytes = compiled_object(cc, src, "-ffreestanding", log);
  if (!bytes) throw Error("package: " + cc + " cannot compile kiln_libm_extras.c: " + log.substr(0, 400));
  const std::filesystem::path obj = work / "kiln_libm_extras.o";
  write_file(obj, *bytes);
  return obj;
}

}  // namespace kiln::package
