/* kiln_rt_topk: TopK as a runtime kernel. Selecting and ordering k of n elements is a sort, which the
 * loop-nest language cannot express. Each row keeps a heap of its k best positions so far in `scratch`
 * (O(n log k) per row, no allocation), then heap-sorts them into output order. The order is total
 * (value, then index), so the result equals the reference's stable sort whatever the heap does. */
#define KILN_RT_KERNEL_SOURCE
#include "kiln_rt_kernels.h"

/* One row of x: the elements at base + p * inner for axis positions p. */
typedef struct {
  const void* x;
  int64_t dtype, base, inner, direction; /* direction -1: largest first; +1: smallest first */
} row_view;

/* Whether axis position p comes before q in the output. */
static int precedes(const row_view* r, int64_t p, int64_t q) {
  int c = (int)r->direction * kiln_rt_compare_elements(r->x, r->dtype, r->base + p * r->inner, r->base + q * r->inner);
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
  const int64_t size = kiln_rt_element_size(dtype);
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
