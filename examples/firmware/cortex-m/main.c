/* Bare-metal firmware around one kiln model, for a Cortex-M board: QEMU's MPS2 boards (the shipped
 * targets cortex-m4 and cortex-m7) or a real part whose target file gives its memory map.
 *
 *   examples/firmware/cortex-m/build.sh MODEL.onnx TARGET OUT_DIR    (compiles, links, runs on QEMU)
 *
 * Nothing is allocated: the arena is a static array in SRAM (.bss) sized by <M>_WORKSPACE_SIZE, the
 * weights are const data in the model's library (flash), the test input is const data (flash), and the
 * outputs are static arrays. The package's startup file and linker script (kiln_cortex_m_startup.c,
 * kiln_board.ld) place it all; printf goes to the host through semihosting (newlib's rdimon).
 *
 * Any model with one input: compile with
 *   -DMODEL_HEADER='"mnist.h"' -DMODEL=mnist -DMODEL_UPPER=MNIST -DINPUT_HEADER='"input.h"'
 * where input.h defines `static const uint8_t firmware_input_bytes[]` (build.sh writes it from the
 * reference interpreter's seeded input). It prints every float32 output value, one per line, so a
 * script can compare them with the reference. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include MODEL_HEADER
#include INPUT_HEADER

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define MODEL_FN(suffix) CAT(MODEL, suffix)         /* MODEL_FN(_run_argv) -> mnist_run_argv */
#define MODEL_MACRO(suffix) CAT(MODEL_UPPER, suffix) /* MODEL_MACRO(_NUM_INPUTS) -> MNIST_NUM_INPUTS */

enum { NUM_INPUTS = MODEL_MACRO(_NUM_INPUTS), NUM_OUTPUTS = MODEL_MACRO(_NUM_OUTPUTS) };
typedef char one_input[NUM_INPUTS == 1 ? 1 : -1];
static const size_t input_sizes[] = MODEL_MACRO(_INPUT_SIZES);
static const size_t output_sizes[] = MODEL_MACRO(_OUTPUT_SIZES);
static const char* const output_dtypes[] = MODEL_MACRO(_OUTPUT_DTYPES);

static uint8_t arena[MODEL_MACRO(_WORKSPACE_SIZE) > 0 ? MODEL_MACRO(_WORKSPACE_SIZE) : 1]
    __attribute__((aligned(MODEL_MACRO(_WORKSPACE_ALIGN))));
/* The outputs, one after another, each 8-byte aligned: 32 KiB, enough for the classifiers and
 * regressors this example is for. */
static uint64_t output_storage[1 << 12];

int main(void) {
  (void)sizeof(one_input);
  if (sizeof firmware_input_bytes != input_sizes[0]) {
    printf("firmware: the test input has %u bytes, the model takes %u\n", (unsigned)sizeof firmware_input_bytes,
           (unsigned)input_sizes[0]);
    return 1;
  }
  void* args[NUM_INPUTS + NUM_OUTPUTS + 1];
  args[0] = (void*)firmware_input_bytes;
  size_t used = 0;
  for (int i = 0; i < NUM_OUTPUTS; ++i) {
    args[NUM_INPUTS + i] = (uint8_t*)output_storage + used;
    used += (output_sizes[i] + 7) / 8 * 8;
  }
  if (used > sizeof output_storage) {
    printf("firmware: the outputs need %u bytes, output_storage has %u\n", (unsigned)used, (unsigned)sizeof output_storage);
    return 1;
  }
  args[NUM_INPUTS + NUM_OUTPUTS] = arena;
  int rc = MODEL_FN(_run_argv)(args);
  if (rc != 0) {
    printf("firmware: the model returned %d\n", rc);
    return 1;
  }
  for (int i = 0; i < NUM_OUTPUTS; ++i) {
    if (strcmp(output_dtypes[i], "float32") != 0) {
      printf("output %d: %s, not printed\n", i, output_dtypes[i]);
      continue;
    }
    const float* v = (const float*)args[NUM_INPUTS + i];
    printf("output %d: %u values\n", i, (unsigned)(output_sizes[i] / sizeof(float)));
    for (size_t k = 0; k < output_sizes[i] / sizeof(float); ++k) printf("%.9g\n", (double)v[k]);
  }
  return 0;
}
