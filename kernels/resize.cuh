// Resize of the two spatial axes of [planes, H, W] (planes = N * C): nearest and (bi)linear, with the ONNX
// coordinate transforms and nearest roundings.
#pragma once

#include "kernels/common.cuh"

namespace cnnrt::kernels {

enum class ResizeMode { Nearest, Linear };

// Output index x -> input coordinate (ONNX Resize coordinate_transformation_mode), with scale = output / input
// as the model gives it and length the resized length (the output size, or input * scale not rounded down):
//   HalfPixel              (x + 0.5) / scale - 0.5
//   PytorchHalfPixel       as HalfPixel when length > 1, else 0
//   AlignCorners           x * (input - 1) / (length - 1), 0 when length is 1
//   Asymmetric             x / scale
//   TfHalfPixelForNearest  (x + 0.5) / scale
enum class ResizeTransform { HalfPixel, PytorchHalfPixel, AlignCorners, Asymmetric, TfHalfPixelForNearest };

// Nearest: which input index a coordinate picks (then clamped to the axis).
enum class NearestRounding { RoundPreferFloor, RoundPreferCeil, Floor, Ceil };

struct ResizeAxis {
  int64_t input = 1;   // > 0
  int64_t output = 1;  // >= 0
  float scale = 1.0f;  // output / input as the model gives it (not recomputed from the extents)
  float resized_length = 1.0f;  // the output size, or input * scale when the model gives scales
};

struct ResizeDesc {
  int64_t planes = 0;  // N * C
  ResizeAxis rows;     // H
  ResizeAxis cols;     // W
  ResizeMode mode = ResizeMode::Nearest;
  ResizeTransform transform = ResizeTransform::HalfPixel;
  NearestRounding rounding = NearestRounding::RoundPreferFloor;  // Nearest only
};

// y[p, oy, ox] from x[p, :, :]. Nearest copies one input element. Linear blends the two rows and two columns
// around the coordinate (clamped to [0, extent - 1], so edges repeat). Coordinates are computed in float with
// one IEEE-rounded operation at a time, as the CPU reference does, so both pick the same pixels. One thread per
// output element.
void launch_resize(const float* x, float* y, const ResizeDesc& desc, cudaStream_t stream);

}  // namespace cnnrt::kernels
