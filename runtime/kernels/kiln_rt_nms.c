/* kiln_rt_nms: NonMaxSuppression with inputs known only at run time (kiln.NonMaxSuppressionBounded).
 * Greedy suppression is data-dependent control flow, not a loop nest. Per (batch, class): the boxes
 * scoring above the threshold are heap-sorted by score (higher first, the lower index first on ties,
 * the reference's order), then taken in turn unless one already kept overlaps it by more than the IoU
 * threshold, up to max_output_boxes_per_class. Overlap is computed in double, as the reference does,
 * so a box on the threshold is decided the same way. */
#define KILN_RT_KERNEL_SOURCE
#include "kiln_rt_kernels.h"

typedef struct {
  double y_min, x_min, y_max, x_max;
} nms_box;

static double min_d(double a, double b) { return a < b ? a : b; }
static double max_d(double a, double b) { return a > b ? a : b; }

static nms_box read_box(const float* p, int64_t center_point) {
  double v0 = p[0], v1 = p[1], v2 = p[2], v3 = p[3];
  nms_box b;
  if (center_point) {
    b.y_min = v1 - v3 / 2;
    b.x_min = v0 - v2 / 2;
    b.y_max = v1 + v3 / 2;
    b.x_max = v0 + v2 / 2;
  } else {
    b.y_min = min_d(v0, v2);
    b.x_min = min_d(v1, v3);
    b.y_max = max_d(v0, v2);
    b.x_max = max_d(v1, v3);
  }
  return b;
}

static int overlaps_too_much(nms_box a, nms_box b, double iou_threshold) {
  double ix = min_d(a.x_max, b.x_max) - max_d(a.x_min, b.x_min);
  double iy = min_d(a.y_max, b.y_max) - max_d(a.y_min, b.y_min);
  double inter, area_a, area_b, uni;
  if (ix <= 0 || iy <= 0) return 0;
  inter = ix * iy;
  area_a = (a.x_max - a.x_min) * (a.y_max - a.y_min);
  area_b = (b.x_max - b.x_min) * (b.y_max - b.y_min);
  uni = area_a + area_b - inter;
  if (area_a <= 0 || area_b <= 0 || uni <= 0) return 0;
  return inter / uni > iou_threshold;
}

/* Whether candidate i comes after candidate j in selection order (`scores`: the class's). */
static int after(const void* scores, int64_t i, int64_t j) {
  const float* s = (const float*)scores;
  return s[i] < s[j] || (s[i] == s[j] && i > j);
}

void kiln_rt_nms(const float* boxes, const float* scores, const int64_t* max_output_boxes_per_class,
                 const float* iou_threshold, const float* score_threshold, int64_t* selected, int64_t* count,
                 int64_t* scratch, int64_t batches, int64_t classes, int64_t num_boxes, int64_t center_point_box,
                 int64_t bound) {
  int64_t max_per_class = max_output_boxes_per_class ? max_output_boxes_per_class[0] : 0;
  double iou = iou_threshold ? iou_threshold[0] : 0.0;
  int64_t* candidates = scratch;
  int64_t* kept = scratch + num_boxes;
  int64_t rows = 0, b, c, i, k, n, m;
  if (max_per_class < 0) max_per_class = 0;
  for (b = 0; b < batches; ++b)
    for (c = 0; c < classes; ++c) {
      const float* s = scores + (b * classes + c) * num_boxes;
      const float* bx = boxes + b * num_boxes * 4;
      n = 0;
      for (i = 0; i < num_boxes; ++i)
        if (!score_threshold || s[i] > score_threshold[0]) candidates[n++] = i;
      kiln_rt_heap_sort(candidates, n, after, s);
      m = 0;
      for (i = 0; i < n && m < max_per_class; ++i) {
        nms_box box = read_box(bx + candidates[i] * 4, center_point_box);
        int keep = 1;
        for (k = 0; k < m && keep; ++k)
          if (overlaps_too_much(box, read_box(bx + kept[k] * 4, center_point_box), iou)) keep = 0;
        if (!keep) continue;
        kept[m++] = candidates[i];
        if (rows < bound) {
          selected[rows * 3] = b;
          selected[rows * 3 + 1] = c;
          selected[rows * 3 + 2] = candidates[i];
        }
        ++rows;
      }
    }
  *count = rows < bound ? rows : bound;
  for (i = *count * 3; i < bound * 3; ++i) selected[i] = 0;
}
