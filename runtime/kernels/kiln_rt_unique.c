/* kiln_rt_unique: Unique of an input known only at run time (kiln.UniqueBounded). Sorting and
 * grouping are not loop nests. The slices along the axis are heap-sorted (lexicographically by their
 * elements in row-major order, ties by position: a total order), so equal slices form runs that start
 * at their first appearance; unsorted output reorders the runs by that first appearance, as the
 * reference does. Elements compare as TopK's do: NaN above every number and equal to NaN (numpy's
 * order, in which np.unique collapses NaNs). */
#define KILN_RT_KERNEL_SOURCE
#include "kiln_rt_kernels.h"

typedef struct {
  const unsigned char* x;
  int64_t dtype, size, outer, slices, inner;
  const int64_t* key; /* when set, ids compare by key[id] instead of by slice */
} unique_ctx;

static int compare_slices(const unique_ctx* c, int64_t s, int64_t t) {
  int64_t o, k;
  for (o = 0; o < c->outer; ++o)
    for (k = 0; k < c->inner; ++k) {
      const int r = kiln_rt_compare_elements(c->x, c->dtype, (o * c->slices + s) * c->inner + k, (o * c->slices + t) * c->inner + k);
      if (r) return r;
    }
  return 0;
}

/* Whether id a comes after id b (`ctx`: a unique_ctx). */
static int after(const void* ctx, int64_t a, int64_t b) {
  const unique_ctx* c = (const unique_ctx*)ctx;
  if (c->key) return c->key[a] > c->key[b];
  {
    const int r = compare_slices(c, a, b);
    return r > 0 || (r == 0 && a > b);
  }
}

void kiln_rt_unique(const void* x, void* y, int64_t* indices, int64_t* inverse, int64_t* counts, int64_t* count,
                    int64_t* scratch, int64_t dtype, int64_t outer, int64_t slices, int64_t inner, int64_t sorted) {
  unique_ctx c;
  int64_t* order = scratch;
  int64_t* first = scratch + slices;
  int64_t* runs = scratch + 2 * slices;
  int64_t* rank = scratch + 3 * slices;
  int64_t groups = 0, i, o, k;
  c.x = (const unsigned char*)x;
  c.dtype = dtype;
  c.size = kiln_rt_element_size(dtype);
  c.outer = outer;
  c.slices = slices;
  c.inner = inner;
  c.key = 0;
  for (i = 0; i < slices; ++i) order[i] = i;
  kiln_rt_heap_sort(order, slices, after, &c);
  for (i = 0; i < slices; ++i) {
    const int64_t s = order[i];
    if (groups == 0 || compare_slices(&c, first[groups - 1], s) != 0) {
      first[groups] = s;
      runs[groups++] = 0;
    }
    ++runs[groups - 1];
    if (inverse) inverse[s] = groups - 1;
  }
  for (i = 0; i < groups; ++i) rank[i] = i;
  if (!sorted) { /* runs by first appearance: order[r] is the group that comes r-th */
    for (i = 0; i < groups; ++i) order[i] = i;
    c.key = first;
    kiln_rt_heap_sort(order, groups, after, &c);
    for (i = 0; i < groups; ++i) rank[order[i]] = i;
  } else {
    for (i = 0; i < groups; ++i) order[i] = i;
  }
  if (inverse)
    for (i = 0; i < slices; ++i) inverse[i] = rank[inverse[i]];
  for (i = 0; i < slices; ++i) {
    const int present = i < groups;
    if (indices) indices[i] = present ? first[order[i]] : 0;
    if (counts) counts[i] = present ? runs[order[i]] : 0;
  }
  if (y) {
    unsigned char* out = (unsigned char*)y;
    const int64_t bytes = inner * c.size;
    for (o = 0; o < outer; ++o)
      for (i = 0; i < slices; ++i) {
        unsigned char* dst = out + (o * slices + i) * bytes;
        const unsigned char* src = c.x + (o * slices + (i < groups ? first[order[i]] : 0)) * bytes;
        for (k = 0; k < bytes; ++k) dst[k] = i < groups ? src[k] : 0;
      }
  }
  *count = groups;
}
