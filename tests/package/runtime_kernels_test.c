/* The runtime kernels (runtime/kernels/) on the cases conformance data does not reach: NaN ordering,
 * ties, a strided axis, an unused output, float16 keys, singular and pivoting matrices, suppression
 * ties and absent thresholds, negative zero and NaN in NonZero. */
#include <stdio.h>
#include <string.h>

#include "kiln_rt_kernels.h"

static int failures = 0;
#define CHECK(cond)                                               \
  do {                                                            \
    if (!(cond)) {                                                \
      fprintf(stderr, "%s:%d: CHECK(%s)\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                 \
    }                                                             \
  } while (0)

static void topk_nan_and_ties(void) {
  const float nan = 0.0f / 0.0f;
  float x[6] = {1.0f, nan, 3.0f, 3.0f, -1.0f, nan};
  float values[4];
  int64_t indices[4], scratch[4];
  kiln_rt_topk(x, values, indices, scratch, KILN_RT_FLOAT32, 1, 6, 1, 4, 1);
  /* NaN ranks above numbers; equal keys (NaN with NaN too) keep the lower index first. */
  CHECK(indices[0] == 1 && indices[1] == 5 && indices[2] == 2 && indices[3] == 3);
  CHECK(values[0] != values[0] && values[2] == 3.0f);
  kiln_rt_topk(x, values, indices, scratch, KILN_RT_FLOAT32, 1, 6, 1, 3, 0);
  CHECK(indices[0] == 4 && indices[1] == 0 && indices[2] == 2);
}

static void topk_strided_axis_without_values(void) {
  /* x[2][3][2], TopK over the middle axis, k = 2, indices only. */
  int32_t x[12] = {5, 0, 7, 1, 6, 2, /* */ -1, 9, -3, 9, -2, 8};
  int64_t indices[8], scratch[2];
  kiln_rt_topk(x, NULL, indices, scratch, KILN_RT_INT32, 2, 3, 2, 2, 1);
  const int64_t want[8] = {1, 2, 2, 1, 0, 0, 2, 1};
  CHECK(memcmp(indices, want, sizeof want) == 0);
}

static void topk_float16_and_k_zero(void) {
  uint16_t x[4] = {0x3c00 /* 1 */, 0xc000 /* -2 */, 0x0001 /* smallest subnormal */, 0x7c00 /* inf */};
  uint16_t values[4];
  int64_t indices[4], scratch[4];
  kiln_rt_topk(x, values, indices, scratch, KILN_RT_FLOAT16, 1, 4, 1, 4, 1);
  CHECK(indices[0] == 3 && indices[1] == 0 && indices[2] == 2 && indices[3] == 1);
  CHECK(values[0] == 0x7c00 && values[3] == 0xc000);
  kiln_rt_topk(x, values, indices, NULL, KILN_RT_FLOAT16, 1, 4, 1, 0, 1); /* k = 0 touches nothing */
}

static void det_cases(void) {
  double a[2][9] = {{0, 2, 1, 3, 0, 0, 1, 1, 1}, /* needs a row swap: det = -3 */
                    {1, 2, 3, 2, 4, 6, 7, 8, 9}}; /* singular */
  double y[2], scratch[9];
  kiln_rt_det(a, y, scratch, KILN_RT_FLOAT64, 2, 3);
  CHECK(y[0] > -3.0 - 1e-12 && y[0] < -3.0 + 1e-12);
  CHECK(y[1] == 0.0);
  float f[4] = {2, 1, 1, 3}, fy;
  double fs[4];
  kiln_rt_det(f, &fy, fs, KILN_RT_FLOAT32, 1, 2);
  CHECK(fy == 5.0f);
}

static void bitcast_copies_bytes(void) {
  float x = 1.0f;
  uint8_t y[4];
  kiln_rt_bitcast(&x, y, 4);
  CHECK(y[0] == 0 && y[1] == 0 && y[2] == 0x80 && y[3] == 0x3f); /* little endian 0x3f800000 */
}

static void nms_ties_thresholds_and_padding(void) {
  /* Three boxes of one class: 0 and 1 identical with equal scores, 2 apart. */
  const float boxes[12] = {0, 0, 1, 1, 0, 0, 1, 1, 5, 5, 6, 6};
  const float scores[3] = {0.5f, 0.5f, 0.7f};
  const int64_t max_two = 2, max_ten = 10;
  const float iou = 0.5f, score_floor = 0.6f;
  int64_t selected[12], count = -1, scratch[6];
  memset(selected, 0x7f, sizeof selected);
  kiln_rt_nms(boxes, scores, &max_ten, &iou, NULL, selected, &count, scratch, 1, 1, 3, 0, 4);
  /* Box 2 first, then box 0 (the lower index of the tie); box 1 overlaps box 0 entirely. */
  CHECK(count == 2 && selected[2] == 2 && selected[5] == 0);
  CHECK(selected[6] == 0 && selected[11] == 0); /* rows past the count are zeros */
  kiln_rt_nms(boxes, scores, &max_ten, NULL, NULL, selected, &count, scratch, 1, 1, 3, 0, 4);
  CHECK(count == 2); /* no iou_threshold: 0, and identical boxes still overlap */
  kiln_rt_nms(boxes, scores, &max_ten, &iou, &score_floor, selected, &count, scratch, 1, 1, 3, 0, 4);
  CHECK(count == 1 && selected[2] == 2);
  kiln_rt_nms(boxes, scores, NULL, &iou, NULL, selected, &count, scratch, 1, 1, 3, 0, 4);
  CHECK(count == 0 && selected[2] == 0); /* no max_output_boxes_per_class keeps none */
  kiln_rt_nms(boxes, scores, &max_two, &iou, NULL, selected, &count, scratch, 1, 1, 3, 0, 1);
  CHECK(count == 1 && selected[2] == 2); /* the bound truncates */
}

static void nonzero_signed_zero_nan_and_padding(void) {
  const float nan = 0.0f / 0.0f;
  const float x[4] = {-0.0f, nan, 0.0f, 2.0f};
  const int16_t ints[6] = {0, 3, 0, 0, 0, -1};
  int64_t y[12], count = -1;
  kiln_rt_nonzero(x, y, &count, KILN_RT_FLOAT32, 4, 1, 4, 1, 1, 1, 1, 1, 1, 1);
  CHECK(count == 2 && y[0] == 1 && y[1] == 3 && y[2] == 0 && y[3] == 0);
  kiln_rt_nonzero(ints, y, &count, KILN_RT_INT16, 6, 2, 2, 3, 1, 1, 1, 1, 1, 1);
  /* [2, 3]: (0, 1) and (1, 2); row then column coordinates, padded to 6 each. */
  CHECK(count == 2 && y[0] == 0 && y[1] == 1 && y[6] == 1 && y[7] == 2 && y[2] == 0 && y[11] == 0);
}

static void unique_signed_and_first_appearance(void) {
  const int8_t x[6] = {3, -1, 3, -128, -1, 2};
  int8_t y[6];
  int64_t indices[6], inverse[6], counts[6], count = -1, scratch[24];
  kiln_rt_unique(x, y, indices, inverse, counts, &count, scratch, KILN_RT_INT8, 1, 6, 1, 1);
  /* Sorted as signed bytes: -128, -1, 2, 3. */
  CHECK(count == 4 && y[0] == -128 && y[1] == -1 && y[2] == 2 && y[3] == 3 && y[4] == 0);
  CHECK(indices[0] == 3 && indices[1] == 1 && counts[1] == 2 && counts[3] == 2 && counts[4] == 0);
  CHECK(inverse[0] == 3 && inverse[1] == 1 && inverse[3] == 0 && inverse[5] == 2);
  kiln_rt_unique(x, y, indices, NULL, counts, &count, scratch, KILN_RT_INT8, 1, 6, 1, 0);
  /* By first appearance: 3, -1, -128, 2. */
  CHECK(count == 4 && y[0] == 3 && y[1] == -1 && y[2] == -128 && y[3] == 2 && indices[2] == 3);
}

static void unique_collapses_nan_above_numbers(void) {
  const float nan = 0.0f / 0.0f;
  const float x[5] = {nan, 1.0f, nan, -2.0f, 1.0f};
  float y[5];
  int64_t counts[5], count = -1, scratch[20];
  kiln_rt_unique(x, y, NULL, NULL, counts, &count, scratch, KILN_RT_FLOAT32, 1, 5, 1, 1);
  CHECK(count == 3 && y[0] == -2.0f && y[1] == 1.0f && y[2] != y[2] && counts[2] == 2);
}

int main(void) {
  unique_collapses_nan_above_numbers();
  unique_signed_and_first_appearance();
  nms_ties_thresholds_and_padding();
  nonzero_signed_zero_nan_and_padding();
  topk_nan_and_ties();
  topk_strided_axis_without_values();
  topk_float16_and_k_zero();
  det_cases();
  bitcast_copies_bytes();
  if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
  return failures != 0;
}
