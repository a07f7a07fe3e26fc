/* Firmware-style use of a kiln package (tiny_cnn): everything static, no malloc, no threads.
 *
 *   kiln compile examples/tiny_cnn.onnx -o PKG --name tiny_cnn
 *   cc -std=c99 -O2 -IPKG examples/firmware/main.c PKG/libtiny_cnn.a -lm -o firmware
 *
 * The workspace is a static arena sized by TINY_CNN_WORKSPACE_SIZE (known at compile time, so the
 * linker map shows the model's whole RAM footprint); the weights are const data in the library, so they
 * stay in flash. A NULL context runs the model serially on the calling thread. It prints the top class,
 * then the top three with their probabilities.
 *
 * The input is a fixed test vector: a built-in pattern, or the bytes of a header named by
 * -DFIRMWARE_INPUT_HEADER="file.h" defining `static const uint8_t firmware_input_bytes[]` (the package
 * test generates one from `kiln run --save-inputs`, to compare with the reference interpreter). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tiny_cnn.h"

#ifdef FIRMWARE_INPUT_HEADER
#include FIRMWARE_INPUT_HEADER
#endif

#define INPUT_COUNT (TINY_CNN_INPUT_IMAGE_SIZE / sizeof(float))
#define CLASS_COUNT (TINY_CNN_OUTPUT_PROBABILITIES_SIZE / sizeof(float))
#define TOP_COUNT (CLASS_COUNT < 3 ? CLASS_COUNT : 3)

/* All the RAM the model needs besides its input and output. (A zero-size array is not C; a model with
 * no intermediates still gets one byte.) */
static uint8_t arena[TINY_CNN_WORKSPACE_SIZE > 0 ? TINY_CNN_WORKSPACE_SIZE : 1]
    __attribute__((aligned(TINY_CNN_WORKSPACE_ALIGN)));
static float image[INPUT_COUNT];
static float probabilities[CLASS_COUNT];

static void load_input(void) {
#ifdef FIRMWARE_INPUT_HEADER
  /* A compile-time check that the test vector matches the model's input. */
  typedef char input_size_matches[sizeof firmware_input_bytes == sizeof image ? 1 : -1];
  (void)sizeof(input_size_matches);
  memcpy(image, firmware_input_bytes, sizeof image);
#else
  /* A diagonal stroke on a dark background: exact in float, the same on every machine. */
  for (size_t i = 0; i < INPUT_COUNT; ++i) {
    size_t row = (i / 16) % 16, col = i % 16;
    image[i] = (row == col || row + 1 == col) ? 1.0f : -0.5f;
  }
#endif
}

int main(void) {
  load_input();
  tiny_cnn_inputs in;
  tiny_cnn_outputs out;
  in.image = image;
  out.probabilities = probabilities;
  int rc = tiny_cnn_run(NULL, &in, &out, arena);
  if (rc != TINY_CNN_OK) {
    printf("tiny_cnn_run failed: %d\n", rc);
    return 1;
  }
  /* The most likely classes, best first (on a tie, the lower class first). */
  size_t top[TOP_COUNT];
  for (size_t r = 0; r < TOP_COUNT; ++r) {
    size_t best = CLASS_COUNT;
    for (size_t k = 0; k < CLASS_COUNT; ++k) {
      int taken = 0;
      for (size_t q = 0; q < r; ++q) taken |= top[q] == k;
      if (!taken && (best == CLASS_COUNT || probabilities[k] > probabilities[best])) best = k;
    }
    top[r] = best;
  }
  printf("top class: %u (p=%.6f)\n", (unsigned)top[0], (double)probabilities[top[0]]);
  printf("top %u:", (unsigned)TOP_COUNT);
  for (size_t r = 0; r < TOP_COUNT; ++r)
    printf("%s %u (p=%.6f)", r ? "," : "", (unsigned)top[r], (double)probabilities[top[r]]);
  printf("\n");
  return 0;
}
