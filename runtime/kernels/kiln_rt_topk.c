/* kiln_rt_topk: TopK as a runtime kernel. Selecting and ordering k of n elements is a sort, which the
 * loop-nest language cannot express. Each row keeps a heap of its k best positions so far in `scratch`
 * (O(n log k) per row, no allocation), then heap-sorts them into output order. The order is total
 * (value, then index), so the result equals the reference's stable sort whatever the heap does. */
#include "kiln_rt_kernels.h"

typedef union {
  uint32_t bits;
  float value;
} float_bits;

static float bfloat16_to_float(uint16_t h) {
  float_bits f;
  f.bits = (uint32_t)h << 16;
  return f.value;
}

static float float16_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  float_bits f;
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

/* Ascending three-way comparisons. NaN sits above every number and ties with NaN, as in the reference
 * (numpy's order); `a != a` tests NaN without libm. */
static int compare_double(double a, double b) {
  int a_nan = a != a, b_nan = b != b;
  if (a_nan || b_nan) return a_nan - b_nan;
  return (a > b) - (a < b);
}
static int compare_int(int64_t a, int64_t b) { return (a > b) - (a < b); }
static int compare_uint(uint64_t a, uint64_t b) { return (a > b) - (a < b); }

static int compare_elements(const void* x, int64_t dtype, int64_t a, int64_t b) {
  switch (dtype) {
    case KILN_RT_FLOAT32: return compare_double(((const float*)x)[a], ((const float*)x)[b]);
    case KILN_RT_FLOAT64: return compare_double(((const double*)x)[a], ((const double*)x)[b]);
    case KILN_RT_FLOAT16:
      return compare_double(float16_to_float(((const uint16_t*)x)[a]), float16_to_float(((const uint16_t*)x)[b]));
    case KILN_RT_BFLOAT16:
      return compare_double(bfloat16_to_float(((const uint16_t*)x)[a]), bfloat16_to_float(((const uint16_t*)x)[b]));
    case KILN_RT_INT8: return compare_int(((const int8_t*)x)[a], ((const int8_t*)x)[b]);
    case KILN_RT_INT16: return compare_int(((const int16_t*)x)[a], ((const int16_t*)x)[b]);
    case KILN_RT_INT32: return compare_int(((const int32_t*)x)[a], ((const int32_t*)x)[b]);
    case KILN_RT_INT64: return compare_int(((const int64_t*)x)[a], ((const int64_t*)x)[b]);
    case KILN_RT_UINT8:
    case KILN_RT_BOOL: return compare_uint(((const uint8_t*)x)[a], ((const uint8_t*)x)[b]);
    case KILN_RT_UINT16: return compare_uint(((const uint16_t*)x)[a], ((const uint16_t*)x)[b]);
    case KILN_RT_UINT32: return compare_uint(((const uint32_t*)x)[a], ((const uint32_t*)x)[b]);
    case KILN_RT_UINT64: return compare_uint(((const uint64_t*)x)[a], ((const uint64_t*)x)[b]);
    default: return 0;
  }
}

static int64_t element_size(int64_t dtype) {
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

/* One row of x: the elements at base + p * inner for axis positions p. */
typedef struct {
  const void* x;
  int64_t dtype, base, inner, direction; /* direction -1: largest first; +1: smallest first */
} row_view;

/* Whether axis position p comes before q in the output. */
static int precedes(const row_view* r, int64_t p, int64_t q) {
  int c = (int)r->direction * compare_elements(r->x, r->dtype, r->base + p * r->inner, r->base + q * r->inner);
  return c < 0 || (c == 0 && p < q);
}

static void swap_positions(int64_t* heap, int64_t i, int64_t j) {
  int64_t t = heap[i];
  heap[i] = heap[j];
  heap[j] = t;
}

/* The heap keeps the position that comes last in output order at its root: the one a better
 * candidate evicts. */
static void sift_down(int64_t* heap, int64_t n, int64_t i, const row_view* r) {
  for (;;) {
    int64_t last = i, left = 2 * i + 1, right = left + 1;
    if (left < n && precedes(r, heap[last], heap[left])) last = left;
    if (right < n && precedes(r, heap[last], heap[right])) last = right;
    if (last == i) return;
    swap_positions(heap, i, last);
    i = last;
  }
}

static void sift_up(int64_t* heap, int64_t i, const row_view* r) {
  while (i > 0) {
    int64_t parent = (i - 1) / 2;
    if (!precedes(r, heap[parent], heap[i])) return;
    swap_positions(heap, i, parent);
    i = parent;
  }
}

/* Leaves the k best positions of the row in heap[0..k), best first. */
static void select_row(int64_t* heap, int64_t extent, int64_t k, const row_view* r) {
  int64_t n = 0;
  for (int64_t p = 0; p < extent; ++p) {
    if (n < k) {
      heap[n] = p;
      sift_up(heap, n++, r);
    } else if (precedes(r, p, heap[0])) {
      heap[0] = p;
      sift_down(heap, k, 0, r);
    }
  }
  for (int64_t end = k - 1; end > 0; --end) { /* heap sort: the last in order moves to the back */
    swap_positions(heap, 0, end);
    sift_down(heap, end, 0, r);
  }
}

void kiln_rt_topk(const void* x, void* values, int64_t* indices, int64_t* scratch, int64_t dtype, int64_t outer,
                  int64_t extent, int64_t inner, int64_t k, int64_t largest) {
  if (k <= 0) return; /* nothing to select; scratch is NULL then */
  const int64_t size = element_size(dtype);
  const unsigned char* src = (const unsigned char*)x;
  unsigned char* dst = (unsigned char*)values;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      row_view r = {x, dtype, o * extent * inner + i, inner, largest ? -1 : 1};
      select_row(scratch, extent, k, &r);
      for (int64_t j = 0; j < k; ++j) {
        int64_t out = (o * k + j) * inner + i;
        if (indices) indices[out] = scratch[j];
        if (dst)
          for (int64_t b = 0; b < size; ++b) dst[out * size + b] = src[(r.base + scratch[j] * inner) * size + b];
      }
    }
}
