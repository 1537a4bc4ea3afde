// Attribute decoding shared by the recurrent family's shape inference and reference kernels: RNN directions and
// activation lists, Resize modes and the per-axis output sizes Resize derives from its scales/sizes inputs.
// Both callers validate through these functions, so compile time and run time agree on what is an error.
#pragma once

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "ir/op_schema.h"

namespace cuvil::recurrent {

// ---- RNN, GRU, LSTM

enum class Direction { Forward, Reverse, Bidirectional };

inline std::optional<Direction> parse_direction(const std::string& s) {
  if (s == "forward") return Direction::Forward;
  if (s == "reverse") return Direction::Reverse;
  if (s == "bidirectional") return Direction::Bidirectional;
  return std::nullopt;
}

inline int num_directions(Direction d) { return d == Direction::Bidirectional ? 2 : 1; }

enum class ActKind { Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu,
                     Softsign, Softplus };

struct Activation {
  ActKind kind = ActKind::Tanh;
  float alpha = 0, beta = 0;
};

struct ActivationInfo {
  const char* name;  // lower case
  ActKind kind;
  bool uses_alpha, uses_beta;
  float default_alpha, default_beta;  // the defaults of the ONNX operators of the same name
};

inline const std::vector<ActivationInfo>& activation_table() {
  static const std::vector<ActivationInfo> t = {
      {"relu", ActKind::Relu, false, false, 0.f, 0.f},
      {"tanh", ActKind::Tanh, false, false, 0.f, 0.f},
      {"sigmoid", ActKind::Sigmoid, false, false, 0.f, 0.f},
      {"affine", ActKind::Affine, true, true, 1.f, 0.f},
      {"leakyrelu", ActKind::LeakyRelu, true, false, 0.01f, 0.f},
      {"thresholdedrelu", ActKind::ThresholdedRelu, true, false, 1.f, 0.f},
      {"scaledtanh", ActKind::ScaledTanh, true, true, 1.f, 1.f},
      {"hardsigmoid", ActKind::HardSigmoid, true, true, 0.2f, 0.5f},
      {"elu", ActKind::Elu, true, false, 1.f, 0.f},
      {"softsign", ActKind::Softsign, false, false, 0.f, 0.f},
      {"softplus", ActKind::Softplus, false, false, 0.f, 0.f},
  };
  return t;
}

struct ActivationsOrError {
  std::vector<Activation> acts;  // num_directions * per_direction entries, direction-major
  std::string error;             // non-empty on failure
};

// Decodes activations / activation_alpha / activation_beta. Names are matched case-insensitively (as ONNX Runtime
// does). alpha and beta values are consumed in order only by the functions that take them; missing ones take the
// ONNX operator's default. A list of per_direction names for a bidirectional op applies to both directions; an
// empty list means `defaults`. RNN's ONNX default lists two names even for one direction, so `lenient_rnn`
// accepts a two-name list there and uses the first.
inline ActivationsOrError resolve_activations(const AttrReader& a, int nd, const std::vector<std::string>& defaults,
                                              bool lenient_rnn = false) {
  ActivationsOrError r;
  const int per = int(defaults.size());
  std::vector<std::string> names = a.strings("activations");
  if (names.empty()) names = defaults;
  const std::vector<double>& alphas = a.floats("activation_alpha");
  const std::vector<double>& betas = a.floats("activation_beta");
  size_t ai = 0, bi = 0;
  std::vector<Activation> decoded;
  for (const std::string& n : names) {
    std::string low;
    for (char ch : n) low += char(std::tolower(static_cast<unsigned char>(ch)));
    const ActivationInfo* info = nullptr;
    for (const auto& e : activation_table())
      if (low == e.name) info = &e;
    if (!info) {
      r.error = "unknown activation function '" + n +
                "' (expected Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, "
                "Elu, Softsign or Softplus)";
      return r;
    }
    Activation act{info->kind, info->default_alpha, info->default_beta};
    if (info->uses_alpha && ai < alphas.size()) act.alpha = float(alphas[ai++]);
    if (info->uses_beta && bi < betas.size()) act.beta = float(betas[bi++]);
    decoded.push_back(act);
  }
  if (int(decoded.size()) == nd * per) {
    r.acts = decoded;
  } else if (int(decoded.size()) == per) {
    for (int d = 0; d < nd; ++d) r.acts.insert(r.acts.end(), decoded.begin(), decoded.end());
  } else if (lenient_rnn && nd == 1 && int(decoded.size()) == 2 * per) {
    r.acts.assign(decoded.begin(), decoded.begin() + per);
  } else {
    r.error = "activations lists " + std::to_string(decoded.size()) + " functions; expected " +
              std::to_string(per) + (nd == 2 ? " or " + std::to_string(2 * per) : std::string()) +
              " for this direction";
  }
  return r;
}

// ---- Resize

enum class ResizeMode { Nearest, Linear, Cubic };
enum class CoordMode {
  HalfPixel,
  PytorchHalfPixel,
  AlignCorners,
  Asymmetric,
  TfCropAndResize,
  TfHalfPixelForNN,
  HalfPixelSymmetric,  // Resize-19
};
// Simple: the rounding of Resize-10 and Upsample (floor when an axis is upsampled, ceil when it is downsampled).
enum class NearestMode { RoundPreferFloor, RoundPreferCeil, Floor, Ceil, Simple };

inline std::optional<ResizeMode> parse_resize_mode(const std::string& s) {
  if (s == "nearest") return ResizeMode::Nearest;
  if (s == "linear") return ResizeMode::Linear;
  if (s == "cubic") return ResizeMode::Cubic;
  return std::nullopt;
}

inline std::optional<CoordMode> parse_coord_mode(const std::string& s) {
  if (s == "half_pixel") return CoordMode::HalfPixel;
  if (s == "pytorch_half_pixel") return CoordMode::PytorchHalfPixel;
  if (s == "align_corners") return CoordMode::AlignCorners;
  if (s == "asymmetric") return CoordMode::Asymmetric;
  if (s == "tf_crop_and_resize") return CoordMode::TfCropAndResize;
  if (s == "tf_half_pixel_for_nn") return CoordMode::TfHalfPixelForNN;
  if (s == "half_pixel_symmetric") return CoordMode::HalfPixelSymmetric;
  return std::nullopt;
}

inline std::optional<NearestMode> parse_nearest_mode(const std::string& s) {
  if (s == "round_prefer_floor") return NearestMode::RoundPreferFloor;
  if (s == "round_prefer_ceil") return NearestMode::RoundPreferCeil;
  if (s == "floor") return NearestMode::Floor;
  if (s == "ceil") return NearestMode::Ceil;
  if (s == "simple") return NearestMode::Simple;
  return std::nullopt;
}

// One axis of a Resize with concrete sizes.
struct ResizeAxis {
  int64_t in = 0, out = 0;
  double scale = 1;           // output length / input length, as the coordinate transforms use it
  double length_resized = 0;  // in * scale: the output length before flooring (scales given), or out (sizes given)
};

struct ResizeAxesOrError {
  std::vector<ResizeAxis> axes;
  std::string error;
};

// The output size of every axis from the concrete scales (f32) or sizes (i64) input, either of which may be null
// or empty. out = floor(in * scale), computed in double as ONNX's reference does.
// scales_with_sizes (Resize's attribute of that name, the form keep_aspect_ratio_policy imports as): both are
// given; sizes sets the output dims and scales the coordinate transforms, as in ONNX's reference there.
inline ResizeAxesOrError resize_axes(const std::vector<int64_t>& in, const Tensor* scales, const Tensor* sizes,
                                     bool scales_with_sizes = false) {
  ResizeAxesOrError r;
  const size_t rank = in.size();
  bool has_scales = scales && scales->numel() > 0, has_sizes = sizes && sizes->numel() > 0;
  if (scales_with_sizes && !(has_scales && has_sizes)) {
    r.error = "scales_with_sizes needs both 'scales' and 'sizes'";
    return r;
  }
  if (has_scales && has_sizes && !scales_with_sizes) {
    r.error = "only one of 'scales' and 'sizes' may be given (the other must be omitted or empty)";
    return r;
  }
  if (!has_scales && !has_sizes) {
    r.error = "one of 'scales' and 'sizes' must be given and non-empty";
    return r;
  }
  for (const Tensor* t : {has_scales ? scales : nullptr, has_sizes ? sizes : nullptr}) {
    if (t && (t->rank() != 1 || size_t(t->numel()) != rank)) {
      r.error = std::string(t == scales ? "scales" : "sizes") + " has shape " + shape_str(t->shape()) +
                "; expected one value per input dim (" + std::to_string(rank) + ")";
      return r;
    }
  }
  const Tensor& t = has_scales ? *scales : *sizes;
  for (size_t i = 0; i < rank; ++i) {
    ResizeAxis a;
    a.in = in[i];
    if (scales_with_sizes) {
      double s = scales->get_f64(int64_t(i));
      int64_t o = sizes->get_i64(int64_t(i));
      if (!(s > 0) || !std::isfinite(s) || o < 0) {
        r.error = "scales[" + std::to_string(i) + "] = " + std::to_string(s) + " must be positive and finite, sizes[" +
                  std::to_string(i) + "] = " + std::to_string(o) + " not negative";
        return r;
      }
      a.scale = s;
      a.length_resized = double(a.in) * s;
      a.out = o;
    } else if (has_scales) {
      double s = t.get_f64(int64_t(i));
      if (!(s > 0) || !std::isfinite(s)) {
        r.error = "scales[" + std::to_string(i) + "] = " + std::to_string(s) + " must be positive and finite";
        return r;
      }
      a.scale = s;
      a.length_resized = double(a.in) * s;
      double o = std::floor(a.length_resized);
      if (o > 9.0e15) {
        r.error = "scales[" + std::to_string(i) + "] gives an output dim too large to represent";
        return r;
      }
      a.out = int64_t(o);
    } else {
      int64_t o = t.get_i64(int64_t(i));
      if (o < 0) {
        r.error = "sizes[" + std::to_string(i) + "] = " + std::to_string(o) + " is negative";
        return r;
      }
      a.out = o;
      a.length_resized = double(o);
      a.scale = a.in > 0 ? double(o) / double(a.in) : 1.0;
    }
    if (a.in == 0 && a.out > 0) {
      r.error = "cannot resize dim " + std::to_string(i) + " from 0 to " + std::to_string(a.out) + " elements";
      return r;
    }
    r.axes.push_back(a);
  }
  return r;
}

}  // namespace cuvil::recurrent
