/* kiln_rt_kernels.h: runtime kernels for the ops that are not loop nests (TopK, Det, BitCast,
 * NonMaxSuppression, NonZero and Unique with run-time result sizes, RoiAlign sampled by run-time ROIs).
 *
 * Generated code calls these through plain C symbols; build_package compiles the ones a model uses with
 * the target's C compiler and adds them to lib<m>.a. They are C11 with no malloc, no stdio and no libm,
 * so a package needs nothing from the C library that the loop-nest code does not already need.
 *
 * Conventions shared by every kernel:
 *  - Tensors are dense, row-major, little endian, as kiln stores them.
 *  - `dtype` is the ONNX TensorProto element type (the values of the KILN_RT_* constants below).
 *  - An output pointer may be NULL when the model does not use that output; the kernel then skips it.
 *  - `scratch`, where a kernel has one, is workspace memory the memory plan reserved for the call
 *    (aligned to 64 bytes, size documented per kernel; NULL when that size is 0); its contents on
 *    entry are unspecified. It is always the last pointer parameter.
 *  - Integer parameters are int64_t so the code generator passes every one the same way.
 */
#ifndef KILN_RT_KERNELS_H_
#define KILN_RT_KERNELS_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
  KILN_RT_FLOAT32 = 1,
  KILN_RT_UINT8 = 2,
  KILN_RT_INT8 = 3,
  KILN_RT_UINT16 = 4,
  KILN_RT_INT16 = 5,
  KILN_RT_INT32 = 6,
  KILN_RT_INT64 = 7,
  KILN_RT_BOOL = 9,
  KILN_RT_FLOAT16 = 10,
  KILN_RT_FLOAT64 = 11,
  KILN_RT_UINT32 = 12,
  KILN_RT_UINT64 = 13,
  KILN_RT_BFLOAT16 = 16
};

/* TopK over the middle axis of x viewed as [outer, extent, inner]: values and indices are
 * [outer, k, inner], best first (largest or smallest), ties broken by the lower index, NaN ordered
 * above every number. values has x's dtype; indices is int64. scratch: k int64_t. */
void kiln_rt_topk(const void* x, void* values, int64_t* indices, int64_t* scratch, int64_t dtype, int64_t outer,
                  int64_t extent, int64_t inner, int64_t k, int64_t largest);

/* Determinants of `batch` row-major n x n matrices (float32 or float64), by LU decomposition with
 * partial pivoting in double precision. scratch: n * n doubles. */
void kiln_rt_det(const void* x, void* y, double* scratch, int64_t dtype, int64_t batch, int64_t n);

/* NonMaxSuppression (float32 boxes [batches, num_boxes, 4], scores [batches, classes, num_boxes]) with a
 * run-time result size: the selected [batch, class, box] rows in the reference's order into `selected`
 * [bound, 3], zeros after them, their number in *count (at most `bound`). max_output_boxes_per_class
 * (int64), iou_threshold and score_threshold (float32) point at one value each, or are NULL when
 * absent. scratch: 2 * num_boxes int64_t. */
void kiln_rt_nms(const float* boxes, const float* scores, const int64_t* max_output_boxes_per_class,
                 const float* iou_threshold, const float* score_threshold, int64_t* selected, int64_t* count,
                 int64_t* scratch, int64_t batches, int64_t classes, int64_t num_boxes, int64_t center_point_box,
                 int64_t bound);

/* NonZero with a run-time result size: x has `elements` elements of `dtype` in `rank` (at most 8)
 * dimensions d0, d1, ...; y is [rank, elements], the coordinates of the nonzero elements in row-major
 * order first, zeros after them; *count is their number. */
void kiln_rt_nonzero(const void* x, int64_t* y, int64_t* count, int64_t dtype, int64_t elements, int64_t rank,
                     int64_t d0, int64_t d1, int64_t d2, int64_t d3, int64_t d4, int64_t d5, int64_t d6, int64_t d7);

/* Unique with a run-time result size over x viewed as [outer, slices, inner] (the slices along the
 * axis; a flattened input is [1, elements, 1]): y [outer, slices, inner] holds the unique slices first
 * (sorted, or by first appearance when `sorted` is 0) and zeros after them; indices and counts
 * [slices] likewise; inverse [slices] maps each slice to its unique one; *count is the number of unique
 * slices. Outputs may be NULL. scratch: 4 * slices int64_t. */
void kiln_rt_unique(const void* x, void* y, int64_t* indices, int64_t* inverse, int64_t* counts, int64_t* count,
                    int64_t* scratch, int64_t dtype, int64_t outer, int64_t slices, int64_t inner, int64_t sorted);

/* RoiAlign with sampling_ratio 0 over run-time ROIs: x [batch, channels, height, width] and rois
 * [num_rois, 4] of `dtype` (float32 or float64), batch_indices of `index_dtype` (int32 or int64), y
 * [num_rois, channels, out_h, out_w]. Each bin is sampled ceil(bin size) times per axis. max_mode and
 * half_pixel are 0 or 1; spatial_scale_bits holds the bits of the double spatial_scale. */
void kiln_rt_roialign(const void* x, const void* rois, const void* batch_indices, void* y, int64_t dtype,
                      int64_t index_dtype, int64_t batch, int64_t channels, int64_t height, int64_t width,
                      int64_t num_rois, int64_t out_h, int64_t out_w, int64_t max_mode, int64_t half_pixel,
                      int64_t spatial_scale_bits);

/* Reinterprets `bytes` bytes of x as the output's dtype: a byte copy (both little endian). */
void kiln_rt_bitcast(const void* x, void* y, int64_t bytes);

#ifdef KILN_RT_KERNEL_SOURCE
/* Helpers the kernels' sources share (each defines KILN_RT_KERNEL_SOURCE first); not part of the
 * interface. */

typedef union {
  uint32_t bits;
  float value;
} kiln_rt_float_bits;

static inline float kiln_rt_bfloat16_to_float(uint16_t h) {
  kiln_rt_float_bits f;
  f.bits = (uint32_t)h << 16;
  return f.value;
}

static inline float kiln_rt_float16_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  kiln_rt_float_bits f;
  if (exponent == 0x1fu) {
    f.bits = sign | 0x7f800000u | (mantissa << 13); /* infinity or NaN */
  } else if (exponent != 0) {
    f.bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    f.bits = sign;
  } else { /* subnormal: normalise into float's range */
    exponent = 113u;
    while (!(mantissa & 0x400u)) {
      mantissa <<= 1;
      --exponent;
    }
    f.bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
  }
  return f.value;
}

/* Ascending three-way comparisons (kiln_rt_compare_elements: elements a and b of x as `dtype`). NaN sits above every number and ties with NaN, as in the reference
 * (numpy's order); `a != a` tests NaN without libm. */
static inline int kiln_rt_compare_double(double a, double b) {
  int a_nan = a != a, b_nan = b != b;
  if (a_nan || b_nan) return a_nan - b_nan;
  return (a > b) - (a < b);
}
static inline int kiln_rt_compare_int(int64_t a, int64_t b) { return (a > b) - (a < b); }
static inline int kiln_rt_compare_uint(uint64_t a, uint64_t b) { return (a > b) - (a < b); }

static inline int kiln_rt_compare_elements(const void* x, int64_t dtype, int64_t a, int64_t b) {
  switch (dtype) {
    case KILN_RT_FLOAT32: return kiln_rt_compare_double(((const float*)x)[a], ((const float*)x)[b]);
    case KILN_RT_FLOAT64: return kiln_rt_compare_double(((const double*)x)[a], ((const double*)x)[b]);
    case KILN_RT_FLOAT16:
      return kiln_rt_compare_double(kiln_rt_float16_to_float(((const uint16_t*)x)[a]), kiln_rt_float16_to_float(((const uint16_t*)x)[b]));
    case KILN_RT_BFLOAT16:
      return kiln_rt_compare_double(kiln_rt_bfloat16_to_float(((const uint16_t*)x)[a]), kiln_rt_bfloat16_to_float(((const uint16_t*)x)[b]));
    case KILN_RT_INT8: return kiln_rt_compare_int(((const int8_t*)x)[a], ((const int8_t*)x)[b]);
    case KILN_RT_INT16: return kiln_rt_compare_int(((const int16_t*)x)[a], ((const int16_t*)x)[b]);
    case KILN_RT_INT32: return kiln_rt_compare_int(((const int32_t*)x)[a], ((const int32_t*)x)[b]);
    case KILN_RT_INT64: return kiln_rt_compare_int(((const int64_t*)x)[a], ((const int64_t*)x)[b]);
    case KILN_RT_UINT8:
    case KILN_RT_BOOL: return kiln_rt_compare_uint(((const uint8_t*)x)[a], ((const uint8_t*)x)[b]);
    case KILN_RT_UINT16: return kiln_rt_compare_uint(((const uint16_t*)x)[a], ((const uint16_t*)x)[b]);
    case KILN_RT_UINT32: return kiln_rt_compare_uint(((const uint32_t*)x)[a], ((const uint32_t*)x)[b]);
    case KILN_RT_UINT64: return kiln_rt_compare_uint(((const uint64_t*)x)[a], ((const uint64_t*)x)[b]);
    default: return 0;
  }
}

static inline int64_t kiln_rt_element_size(int64_t dtype) {
  switch (dtype) {
    case KILN_RT_FLOAT64:
    case KILN_RT_INT64:
    case KILN_RT_UINT64: return 8;
    case KILN_RT_FLOAT32:
    case KILN_RT_INT32:
    case KILN_RT_UINT32: return 4;
    case KILN_RT_FLOAT16:
    case KILN_RT_BFLOAT16:
    case KILN_RT_INT16:
    case KILN_RT_UINT16: return 2;
    default: return 1;
  }
}

/* Whether id a comes after id b in the order a kernel sorts by (`ctx`: what it compares). */
typedef int (*kiln_rt_after_fn)(const void* ctx, int64_t a, int64_t b);

static inline void kiln_rt_sift_down(int64_t* ids, int64_t root, int64_t end, kiln_rt_after_fn after, const void* ctx) {
  for (;;) {
    int64_t child = 2 * root + 1, t;
    if (child >= end) return;
    if (child + 1 < end && after(ctx, ids[child + 1], ids[child])) ++child;
    if (!after(ctx, ids[child], ids[root])) return;
    t = ids[root], ids[root] = ids[child], ids[child] = t;
    root = child;
  }
}

/* Heap sort of ids[0..n) into `after`'s order, in place and without allocation: a heap whose root
 * comes last, popped to the back. With a total order the result does not depend on the heap. */
static inline void kiln_rt_heap_sort(int64_t* ids, int64_t n, kiln_rt_after_fn after, const void* ctx) {
  int64_t i, t;
  for (i = n / 2 - 1; i >= 0; --i) kiln_rt_sift_down(ids, i, n, after, ctx);
  for (i = n - 1; i > 0; --i) {
    t = ids[0], ids[0] = ids[i], ids[i] = t;
    kiln_rt_sift_down(ids, 0, i, after, ctx);
  }
}

#endif /* KILN_RT_KERNEL_SOURCE */

#ifdef __cplusplus
}
#endif

#endif /* KILN_RT_KERNELS_H_ */
