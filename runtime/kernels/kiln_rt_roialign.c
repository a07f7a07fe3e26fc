/* kiln_rt_roialign: RoiAlign whose sample grid depends on run-time ROIs (sampling_ratio 0 with ROIs
 * that are not constants). The loop-nest version needs the largest grid at compile time; here each
 * ROI's bin is sampled ceil(bin size) times per axis, as the reference does, in double. Samples
 * outside [-1, H] x [-1, W] count as zero; max mode keeps the largest weighted corner (the reference's
 * reading of the spec). A batch index out of range is clamped, as in the loop-nest version. */
#include "kiln_rt_kernels.h"

static double load(const void* p, int64_t i, int64_t dtype) {
  return dtype == KILN_RT_FLOAT64 ? ((const double*)p)[i] : (double)((const float*)p)[i];
}

static void store(void* p, int64_t i, int64_t dtype, double v) {
  if (dtype == KILN_RT_FLOAT64) ((double*)p)[i] = v;
  else ((float*)p)[i] = (float)v;
}

static int64_t ceil_to_int(double v) {
  int64_t i = (int64_t)v; /* truncation: the ceiling already for v <= 0 */
  return (double)i < v ? i + 1 : i;
}

/* The four corners and weights of a bilinear sample at (y, x); 0 when it lies outside the map. */
static int corners(double y, double x, int64_t height, int64_t width, int64_t offset[4], double weight[4]) {
  int64_t y_low, x_low, y_high, x_high;
  double ly, lx;
  if (y < -1.0 || y > (double)height || x < -1.0 || x > (double)width) return 0;
  if (y < 0) y = 0;
  if (x < 0) x = 0;
  y_low = (int64_t)y;
  x_low = (int64_t)x;
  if (y_low >= height - 1) {
    y_high = y_low = height - 1;
    y = (double)y_low;
  } else {
    y_high = y_low + 1;
  }
  if (x_low >= width - 1) {
    x_high = x_low = width - 1;
    x = (double)x_low;
  } else {
    x_high = x_low + 1;
  }
  ly = y - (double)y_low;
  lx = x - (double)x_low;
  offset[0] = y_low * width + x_low;
  offset[1] = y_low * width + x_high;
  offset[2] = y_high * width + x_low;
  offset[3] = y_high * width + x_high;
  weight[0] = (1 - ly) * (1 - lx);
  weight[1] = (1 - ly) * lx;
  weight[2] = ly * (1 - lx);
  weight[3] = ly * lx;
  return 1;
}

void kiln_rt_roialign(const void* x, const void* rois, const void* batch_indices, void* y, int64_t dtype,
                      int64_t index_dtype, int64_t batch, int64_t channels, int64_t height, int64_t width,
                      int64_t num_rois, int64_t out_h, int64_t out_w, int64_t max_mode, int64_t half_pixel,
                      int64_t spatial_scale_bits) {
  union {
    int64_t bits;
    double value;
  } scale;
  const double shift = half_pixel ? 0.5 : 0.0;
  int64_t roi, ch, ph, pw, iy, ix, j;
  scale.bits = spatial_scale_bits;
  for (roi = 0; roi < num_rois; ++roi) {
    int64_t b = index_dtype == KILN_RT_INT32 ? ((const int32_t*)batch_indices)[roi] : ((const int64_t*)batch_indices)[roi];
    double start_w = load(rois, roi * 4 + 0, dtype) * scale.value - shift;
    double start_h = load(rois, roi * 4 + 1, dtype) * scale.value - shift;
    double roi_w = load(rois, roi * 4 + 2, dtype) * scale.value - shift - start_w;
    double roi_h = load(rois, roi * 4 + 3, dtype) * scale.value - shift - start_h;
    double bin_h, bin_w;
    int64_t grid_h, grid_w, per_bin;
    if (b < 0) b = 0;
    if (b >= batch) b = batch - 1;
    if (!half_pixel) { /* malformed ROIs become 1x1 */
      if (roi_w < 1.0) roi_w = 1.0;
      if (roi_h < 1.0) roi_h = 1.0;
    }
    bin_h = roi_h / (double)out_h;
    bin_w = roi_w / (double)out_w;
    grid_h = ceil_to_int(bin_h);
    grid_w = ceil_to_int(bin_w);
    per_bin = grid_h * grid_w;
    for (ch = 0; ch < channels; ++ch) {
      const int64_t base = (b * channels + ch) * height * width;
      for (ph = 0; ph < out_h; ++ph)
        for (pw = 0; pw < out_w; ++pw) {
          double acc = 0;
          int64_t taken = 0;
          for (iy = 0; iy < grid_h; ++iy) {
            const double yy = start_h + (double)ph * bin_h + ((double)iy + 0.5) * bin_h / (double)grid_h;
            for (ix = 0; ix < grid_w; ++ix) {
              const double xx = start_w + (double)pw * bin_w + ((double)ix + 0.5) * bin_w / (double)grid_w;
              int64_t offset[4];
              double weight[4], v = 0;
              const int inside = corners(yy, xx, height, width, offset, weight);
              if (max_mode) {
                if (inside) {
                  v = weight[0] * load(x, base + offset[0], dtype);
                  for (j = 1; j < 4; ++j) {
                    const double c = weight[j] * load(x, base + offset[j], dtype);
                    if (c > v) v = c;
                  }
                }
                acc = taken == 0 || v > acc ? v : acc;
              } else if (inside) {
                for (j = 0; j < 4; ++j) acc += weight[j] * load(x, base + offset[j], dtype);
              }
              ++taken;
            }
          }
          if (!max_mode) acc /= (double)(per_bin > 1 ? per_bin : 1);
          store(y, ((roi * channels + ch) * out_h + ph) * out_w + pw, dtype, acc);
        }
    }
  }
}
