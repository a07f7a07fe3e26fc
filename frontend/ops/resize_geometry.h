/// \file The sampling geometry of Resize and Upsample: which input positions each output position reads
/// and with which weights. The reference kernel (nn_resize.cc) and the TE lowering
/// (scheduler/te/ops/nn_resize_lowering.cc) both build their tables from here, so shape inference, the
/// reference and generated code agree by construction on every attribute, opset rule and rounding.
///
/// Resizing is separable: every output coordinate along an axis maps to an input coordinate
/// (coordinate_transformation_mode), and the value there is a weighted sum of a few input neighbours
/// along that axis (mode and its coefficients).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "frontend/ops/op_registry.h"

namespace kiln::nn {

enum class ResizeMode { Nearest, Linear, Cubic };

/// Everything that fixes the sampling geometry of one Resize/Upsample node, per axis where it varies.
struct ResizeSpec {
  ResizeMode mode = ResizeMode::Nearest;
  std::string coordinate_mode = "half_pixel";
  std::string nearest_mode = "round_prefer_floor";
  // Upsample and Resize-10 predate the modes: asymmetric coordinates, and nearest takes floor when
  // upsampling and ceil when downsampling (what onnxruntime does for them).
  bool legacy = false;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation_value = 0;
  bool antialias = false;
  Shape in, out;
  std::vector<double> scales;              // per axis
  std::vector<double> output_widths;       // per axis: scale * in, possibly fractional, or the requested size
  std::vector<double> roi_start, roi_end;  // per axis, tf_crop_and_resize only
};

/// Which inputs hold roi / scales / sizes for this op and opset (SIZE_MAX: the op has no such input;
/// Upsample-7 takes its scales from an attribute).
struct ResizeInputs {
  size_t roi = SIZE_MAX, scales = SIZE_MAX, sizes = SIZE_MAX;
};
ResizeInputs resize_inputs(const Node& node);

/// The three operand inputs, so a lookup can treat them differently (shape inference ignores roi).
enum class ResizeOperand { Roi, Scales, Sizes };
const char* resize_operand_name(ResizeOperand what);

/// The value of operand input `input`, or nullptr when it is absent, empty or (roi only) unknown.
/// Shape inference, the reference kernel and the lowering each see input values differently.
using ResizeOperandLookup = std::function<const Tensor*(size_t input, ResizeOperand what)>;

/// Builds and validates the spec of `node` with input shape `in`; `operand` is asked only for the
/// inputs resize_inputs says the node has.
ResizeSpec resize_spec(const Node& node, const Shape& in, const ResizeOperandLookup& operand);

/// The axes `scales`/`sizes`/`roi` refer to, in their order: the `axes` attribute (opset 18) or all.
std::vector<int64_t> resize_axes(const Node& node, int64_t rank);

/// The input coordinate that output coordinate `o` along `axis` samples.
double source_coordinate(const ResizeSpec& s, size_t axis, int64_t o);

/// The cubic convolution kernel with coefficient `a` (cubic_coeff_a) at distance `x`.
double cubic_kernel(double x, double a);

/// Nearest mode: the neighbour below or above source coordinate `x`, by nearest_mode (or the legacy
/// rule), clamped into the axis.
int64_t nearest_index(const ResizeSpec& s, size_t axis, double x);

/// How one axis's taps sit around the source coordinate: `taps` neighbours starting `first` from the
/// base index. Antialiasing (downscaling only) stretches the kernel by 1 / scale, widening it.
struct TapLayout {
  int64_t first = 0, taps = 1;
  double kernel_scale = 1;
};
TapLayout tap_layout(const ResizeSpec& s, size_t axis);

/// Whether an output's tap weights are divided by their sum (antialias, exclude_outside).
bool normalizes_weights(const ResizeSpec& s);

/// One axis's sampling: per output coordinate `layout.taps` (input index, weight) pairs, and whether
/// it lies inside the crop region (tf_crop_and_resize; outside, the output is extrapolation_value).
struct AxisTable {
  TapLayout layout;
  std::vector<int64_t> index;
  std::vector<double> weight;
  std::vector<int64_t> inside;  // 1 inside, 0 outside
  bool identity = true;         // reads input coordinate o for output coordinate o, with weight 1
  bool any_outside = false;
};
AxisTable axis_table(const ResizeSpec& s, size_t axis);

}  // namespace kiln::nn
