// Loop nests of the reference convolutions and pools. Spatial dims are padded to three (leading dims of size 1,
// stride 1, no padding) so one nest serves 1-D, 2-D and 3-D. Inner loops run over the last spatial dim, which is
// contiguous in memory, over a range computed up front so they carry no bounds checks.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "ir/dtype.h"

namespace cuvil::ref::nn {

inline int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
inline int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

struct Geom {
  int64_t n = 0, c_in = 0, c_out = 0, group = 1;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  int64_t s[3] = {1, 1, 1}, d[3] = {1, 1, 1}, pb[3] = {0, 0, 0}, pe[3] = {0, 0, 0};

  int64_t in_plane() const { return in[0] * in[1] * in[2]; }
  int64_t out_plane() const { return out[0] * out[1] * out[2]; }
  int64_t k_size() const { return k[0] * k[1] * k[2]; }
};

struct Range {
  int64_t lo, hi;  // [lo, hi)
  bool empty() const { return lo >= hi; }
};

// Positions o in [0, limit) with 0 <= o * s + off < n: the outputs a kernel tap reaches (forward) or the inputs a
// tap reads into range (transposed).
inline Range tap_range(int64_t limit, int64_t s, int64_t off, int64_t n) {
  return {std::max<int64_t>(0, ceil_div(-off, s)), std::min(limit, ceil_div(n - off, s))};
}

// The channel pairs of a grouped convolution: fills each output plane y[n, m] with bias[m] (0 without a bias), then
// calls f(xp, yp, m, ci) for each input plane xp = x[n, c] of m's group, c = group * C/group + ci, and yp = y[n, m].
template <class A, class F>
void for_each_channel_pair(const Geom& g, const A* x, const A* bias, A* y, F f) {
  const int64_t cg = g.c_in / g.group, mg = g.c_out / g.group;
  const int64_t in_plane = g.in_plane(), out_plane = g.out_plane();
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t m = 0; m < g.c_out; ++m) {
      A* yp = y + (n * g.c_out + m) * out_plane;
      std::fill(yp, yp + out_plane, bias ? bias[m] : A(0));
      const int64_t grp = m / mg;
      for (int64_t ci = 0; ci < cg; ++ci) f(x + (n * g.c_in + grp * cg + ci) * in_plane, yp, m, ci);
    }
  }
}

// The kernel taps of a convolution that reach some position: calls f(tap, off, r) for each tap whose ranges are
// all non-empty, where tap is its flat index in the kernel, off[a] = k_a * d_a - pb_a, and r[a] =
// tap_range(limit[a], s_a, off[a], extent[a]) the positions it reaches along spatial dim a.
template <class F>
void for_each_tap(const Geom& g, const int64_t (&limit)[3], const int64_t (&extent)[3], F f) {
  int64_t off[3];
  Range r[3];
  for (int64_t k0 = 0; k0 < g.k[0]; ++k0) {
    off[0] = k0 * g.d[0] - g.pb[0];
    r[0] = tap_range(limit[0], g.s[0], off[0], extent[0]);
    for (int64_t k1 = 0; k1 < g.k[1]; ++k1) {
      off[1] = k1 * g.d[1] - g.pb[1];
      r[1] = tap_range(limit[1], g.s[1], off[1], extent[1]);
      for (int64_t k2 = 0; k2 < g.k[2]; ++k2) {
        off[2] = k2 * g.d[2] - g.pb[2];
        r[2] = tap_range(limit[2], g.s[2], off[2], extent[2]);
        if (r[0].empty() || r[1].empty() || r[2].empty()) continue;
        f((k0 * g.k[1] + k1) * g.k[2] + k2, off, r);
      }
    }
  }
}

// Zero padding is an input of zeros: a tap whose weight is NaN or infinite adds w * 0 = NaN at every output where
// it reads the padding, as PyTorch, ONNX's reference implementation and ONNX Runtime compute it (the tap loops of
// conv_forward skip the padding, which is exact for finite weights only).
template <class A>
void add_padding_products(const Geom& g, const A* wp, A* yp) {
  for (int64_t k0 = 0; k0 < g.k[0]; ++k0)
    for (int64_t k1 = 0; k1 < g.k[1]; ++k1)
      for (int64_t k2 = 0; k2 < g.k[2]; ++k2) {
        const A wv = wp[(k0 * g.k[1] + k1) * g.k[2] + k2];
        if (std::isfinite(wv)) continue;
        const int64_t k[3] = {k0, k1, k2};
        int64_t o[3], at = 0;
        for (o[0] = 0; o[0] < g.out[0]; ++o[0])
          for (o[1] = 0; o[1] < g.out[1]; ++o[1])
            for (o[2] = 0; o[2] < g.out[2]; ++o[2], ++at) {
              bool in_padding = false;
              for (int a = 0; a < 3; ++a) {
                int64_t i = o[a] * g.s[a] + k[a] * g.d[a] - g.pb[a];
                in_padding |= i < 0 || i >= g.in[a];
              }
              if (in_padding) yp[at] += wv * A(0);
            }
      }
}

// Forward convolution: y[n, m, o] = bias[m] + sum over ci, k of x[n, grp*Cg + ci, o*s + k*d - pb] * w[m, ci, k].
// x: [N, C, in], w: [M, C/group, k], y: [N, M, out], all contiguous and of the accumulation type A.
template <class A>
void conv_forward(const Geom& g, const A* x, const A* w, const A* bias, A* y) {
  const int64_t cg = g.c_in / g.group, ksz = g.k_size();
  for_each_channel_pair(g, x, bias, y, [&](const A* xp, A* yp, int64_t m, int64_t ci) {
    const A* wp = w + (m * cg + ci) * ksz;
    // Each tap adds w * x over the outputs o whose input o * s + off lies inside x.
    for_each_tap(g, g.out, g.in, [&](int64_t tap, const int64_t* off, const Range* r) {
      const A wv = wp[tap];
      const int64_t len = r[2].hi - r[2].lo, s2 = g.s[2];
      for (int64_t o0 = r[0].lo; o0 < r[0].hi; ++o0) {
        const int64_t i0 = o0 * g.s[0] + off[0];
        for (int64_t o1 = r[1].lo; o1 < r[1].hi; ++o1) {
          const int64_t i1 = o1 * g.s[1] + off[1];
          const A* xr = xp + (i0 * g.in[1] + i1) * g.in[2] + r[2].lo * s2 + off[2];
          A* yr = yp + (o0 * g.out[1] + o1) * g.out[2] + r[2].lo;
          if (s2 == 1) {
            for (int64_t j = 0; j < len; ++j) yr[j] += wv * xr[j];
          } else {
            for (int64_t j = 0; j < len; ++j) yr[j] += wv * xr[j * s2];
          }
        }
      }
    });
    if constexpr (std::is_floating_point_v<A>) add_padding_products(g, wp, yp);
  });
}

// Transposed convolution: y[n, m, i*s + k*d - pb] += x[n, c, i] * w[c, mo, k] for each input channel c of the
// group of output channel m = grp*Mg + mo. x: [N, C, in], w: [C, M/group, k], y: [N, M, out].
template <class A>
void conv_transpose(const Geom& g, const A* x, const A* w, const A* bias, A* y) {
  const int64_t cg = g.c_in / g.group, mg = g.c_out / g.group, ksz = g.k_size();
  for_each_channel_pair(g, x, bias, y, [&](const A* xp, A* yp, int64_t m, int64_t ci) {
    const int64_t c = (m / mg) * cg + ci;
    const A* wp = w + (c * mg + m % mg) * ksz;
    // Each tap adds w * x[i] to the outputs i * s + off that lie inside y.
    for_each_tap(g, g.in, g.out, [&](int64_t tap, const int64_t* off, const Range* r) {
      const A wv = wp[tap];
      const int64_t len = r[2].hi - r[2].lo, s2 = g.s[2];
      for (int64_t i0 = r[0].lo; i0 < r[0].hi; ++i0) {
        const int64_t o0 = i0 * g.s[0] + off[0];
        for (int64_t i1 = r[1].lo; i1 < r[1].hi; ++i1) {
          const int64_t o1 = i1 * g.s[1] + off[1];
          const A* xr = xp + (i0 * g.in[1] + i1) * g.in[2] + r[2].lo;
          A* yr = yp + (o0 * g.out[1] + o1) * g.out[2] + r[2].lo * s2 + off[2];
          for (int64_t j = 0; j < len; ++j) yr[j * s2] += wv * xr[j];
        }
      }
    });
  });
}

template <class V>
bool is_nan_value(V v) {
  if constexpr (std::is_floating_point_v<V>) return std::isnan(v);
  else return false;
}

// The pooling windows: calls f(p, o, st) for each output position o (flat within its plane) of each (n, c) plane
// p, where st[a] = o_a * s_a - pb_a is where the window starts in the input along spatial dim a.
template <class F>
void for_each_window(const Geom& g, F f) {
  for (int64_t p = 0; p < g.n * g.c_in; ++p) {
    int64_t o = 0;
    for (int64_t o0 = 0; o0 < g.out[0]; ++o0) {
      for (int64_t o1 = 0; o1 < g.out[1]; ++o1) {
        for (int64_t o2 = 0; o2 < g.out[2]; ++o2, ++o) {
          const int64_t st[3] = {o0 * g.s[0] - g.pb[0], o1 * g.s[1] - g.pb[1], o2 * g.s[2] - g.pb[2]};
          f(p, o, st);
        }
      }
    }
  }
}

// Max pooling over each (n, c) plane. NaN propagates (as in numpy and PyTorch). `ind`, when given, receives the
// flat index of each maximum in x (row-major, or column-major over the spatial dims when col_major), including
// the (n, c) plane offset.
template <class T>
void max_pool(const Geom& g, const T* x, T* y, int64_t* ind, bool col_major) {
  using C = compute_t<T>;
  const int64_t in_plane = g.in_plane(), out_plane = g.out_plane();
  const C lowest = std::numeric_limits<C>::has_infinity ? -std::numeric_limits<C>::infinity()
                                                        : std::numeric_limits<C>::lowest();
  for_each_window(g, [&](int64_t p, int64_t o, const int64_t* st) {
    const T* xp = x + p * in_plane;
    // The taps that land inside the input, per dim.
    Range r[3];
    for (int a = 0; a < 3; ++a) r[a] = tap_range(g.k[a], g.d[a], st[a], g.in[a]);
    C best = lowest;
    int64_t best_i[3] = {-1, -1, -1};
    for (int64_t k0 = r[0].lo; k0 < r[0].hi; ++k0) {
      const int64_t i0 = st[0] + k0 * g.d[0];
      for (int64_t k1 = r[1].lo; k1 < r[1].hi; ++k1) {
        const int64_t i1 = st[1] + k1 * g.d[1];
        const T* xr = xp + (i0 * g.in[1] + i1) * g.in[2];
        for (int64_t k2 = r[2].lo; k2 < r[2].hi; ++k2) {
          const int64_t i2 = st[2] + k2 * g.d[2];
          const C v = C(xr[i2]);
          if (best_i[0] < 0 || v > best || (is_nan_value(v) && !is_nan_value(best))) {
            best = v;
            best_i[0] = i0, best_i[1] = i1, best_i[2] = i2;
          }
        }
      }
    }
    y[p * out_plane + o] = T(best);
    if (!ind) return;
    int64_t flat = -1;  // a window entirely in the padding has no maximum
    if (best_i[0] >= 0) {
      flat = col_major ? best_i[0] + best_i[1] * g.in[0] + best_i[2] * g.in[0] * g.in[1]
                       : (best_i[0] * g.in[1] + best_i[1]) * g.in[2] + best_i[2];
      flat += p * in_plane;
    }
    ind[p * out_plane + o] = flat;
  });
}

// Average pooling over each (n, c) plane, summing in double; taps dilations apart (AveragePool-19). The divisor
// counts the taps inside the input, or
// with count_include_pad the taps inside the padded input (taps past the end padding, which ceil_mode can add,
// never count).
template <class T>
void avg_pool(const Geom& g, const T* x, T* y, bool count_include_pad) {
  const int64_t in_plane = g.in_plane(), out_plane = g.out_plane();
  for_each_window(g, [&](int64_t p, int64_t o, const int64_t* st) {
    const T* xp = x + p * in_plane;
    Range r[3];
    int64_t count = 1;
    for (int a = 0; a < 3; ++a) {
      r[a] = tap_range(g.k[a], g.d[a], st[a], g.in[a]);
      if (count_include_pad) {
        Range padded = tap_range(g.k[a], g.d[a], st[a] + g.pb[a], g.in[a] + g.pb[a] + g.pe[a]);
        count *= std::max<int64_t>(0, padded.hi - padded.lo);
      } else {
        count *= std::max<int64_t>(0, r[a].hi - r[a].lo);
      }
    }
    double sum = 0;
    for (int64_t k0 = r[0].lo; k0 < r[0].hi; ++k0) {
      for (int64_t k1 = r[1].lo; k1 < r[1].hi; ++k1) {
        const T* xr = xp + ((st[0] + k0 * g.d[0]) * g.in[1] + st[1] + k1 * g.d[1]) * g.in[2] + st[2];
        for (int64_t k2 = r[2].lo; k2 < r[2].hi; ++k2) sum += double(xr[k2 * g.d[2]]);
      }
    }
    y[p * out_plane + o] = T(compute_t<T>(sum / double(count)));
  });
}

}  // namespace cuvil::ref::nn
