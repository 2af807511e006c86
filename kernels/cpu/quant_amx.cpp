#include "kernels/cpu/quant_amx.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include <ATen/Parallel.h>

#include "kernels/common/half.h"
#include "kernels/cpu/quant_gemv.h"

// How the tiles are used. A tile product C[16×16] += A[16×K] · B[K×16] with int8 inputs and
// int32 sums (tdpbssd), K = 32: one weight block (or Q4_K sub-block) at a time, since each has its
// own scale. A: 16 activation rows' 32 quantized values. B: 16 weight rows' 32 values, repacked
// once per call into the tile layout (four consecutive values of one row side by side:
// B[k/4][4n + k%4] = W[n][k]) and kept for every group of 16 activation rows. After each product
// the int32 sums are scaled into fp32 accumulators: acc[m][n] += C[m][n] · dₓ[m] · d_w[n], plus
// for Q4_1 / Q4_K the offset term sₓ[m] · m_w[n] (sₓ = dₓ · Σ of the block's q). The integer
// sums are exact; only the order of the fp32 sums differs from the one-row kernels.
namespace luka::cpu::detail {

namespace {

using gguf::GgmlType;

#define LUKA_AMX __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512dq,avx512vl,fma,f16c")))

float half_at(const std::uint8_t* p) { return half_to_float(static_cast<std::uint16_t>(p[0] | (p[1] << 8))); }

// 64-byte tile configuration (palette 1): tiles 0, 3 are C (16 × 64 bytes), 1, 4 A (16 × 32),
// 2, 5 B (8 × 64): two blocks in flight.
struct alignas(64) TileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
};

TileConfig tile_config() {
  TileConfig c;
  for (int t : {0, 3}) c.colsb[t] = 64, c.rows[t] = 16;
  for (int t : {1, 4}) c.colsb[t] = 32, c.rows[t] = 16;
  for (int t : {2, 5}) c.colsb[t] = 64, c.rows[t] = 8;
  return c;
}

// One row's 32-value sub-block sb as int8 values, with its scale and offset: W = d_w · v + m_w.
struct SubBlock {
  std::int8_t v[32];
  float d = 0, m = 0;
};

void decode_sub_block(GgmlType type, const std::uint8_t* row, std::int64_t sb, SubBlock& s) {
  switch (type) {
    case GgmlType::kQ8_0: {
      const std::uint8_t* blk = row + sb * block_geometry(type).bytes;
      s.d = half_at(blk);
      std::memcpy(s.v, blk + 2, 32);
      s.m = 0;
      return;
    }
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1: {
      const bool q41 = type == GgmlType::kQ4_1;
      const std::uint8_t* blk = row + sb * block_geometry(type).bytes;
      const std::uint8_t* qs = blk + (q41 ? 4 : 2);
      const int bias = q41 ? 0 : 8;
      for (int e = 0; e < 16; ++e) {
        s.v[e] = static_cast<std::int8_t>((qs[e] & 0xF) - bias);
        s.v[e + 16] = static_cast<std::int8_t>((qs[e] >> 4) - bias);
      }
      s.d = half_at(blk);
      s.m = q41 ? half_at(blk + 2) : 0.0f;
      return;
    }
    case GgmlType::kQ4_K: {
      const std::uint8_t* blk = row + (sb / 8) * block_geometry(type).bytes;
      const int j = static_cast<int>(sb % 8);
      const std::uint8_t* sc = blk + 4;
      // The 6-bit scale and min of sub-block j (ggml_types.cpp documents the packing).
      const int scale = j < 4 ? sc[j] & 63 : (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4);
      const int min = j < 4 ? sc[j + 4] & 63 : (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
      const std::uint8_t* qs = blk + 16 + 32 * (j / 2);
      for (int e = 0; e < 32; ++e) s.v[e] = static_cast<std::int8_t>(j % 2 == 0 ? qs[e] & 0xF : qs[e] >> 4);
      s.d = half_at(blk) * static_cast<float>(scale);
      s.m = -half_at(blk + 2) * static_cast<float>(min);
      return;
    }
    default: return;
  }
}

std::int64_t row_bytes(GgmlType type, std::int64_t in) { return quant_row_bytes(type, in); }

// The B side of 16 weight rows [n0, n0 + 16) (rows past `out` are zero): per sub-block 512 bytes
// of tile layout, 16 scales and 16 offsets.
struct Panel {
  std::vector<std::int8_t> b;
  std::vector<float> d, m;
};

void repack_panel(GgmlType type, const std::uint8_t* w, std::int64_t out, std::int64_t in, std::int64_t n0, Panel& p) {
  const std::int64_t nsb = in / 32, stride = row_bytes(type, in);
  const int rows = static_cast<int>(std::min<std::int64_t>(16, out - n0));
  p.b.resize(static_cast<std::size_t>(nsb * 512));
  p.d.assign(static_cast<std::size_t>(nsb * 16), 0.0f);
  p.m.assign(static_cast<std::size_t>(nsb * 16), 0.0f);
  SubBlock s[16];
  for (std::int64_t sb = 0; sb < nsb; ++sb) {
    for (int n = 0; n < 16; ++n) {
      if (n < rows) {
        decode_sub_block(type, w + (n0 + n) * stride, sb, s[n]);
      } else {
        std::memset(s[n].v, 0, 32);
        s[n].d = s[n].m = 0;
      }
      p.d[sb * 16 + n] = s[n].d;
      p.m[sb * 16 + n] = s[n].m;
    }
    // Tile row k4 holds values 4·k4 .. 4·k4 + 3 of rows 0..15: one 32-bit word per row.
    auto* tile = reinterpret_cast<std::uint32_t*>(p.b.data() + sb * 512);
    for (int k4 = 0; k4 < 8; ++k4)
      for (int n = 0; n < 16; ++n) std::memcpy(tile + k4 * 16 + n, s[n].v + 4 * k4, 4);
  }
}

// Scales one 16 × 16 int32 product into the accumulators.
LUKA_AMX inline void scale_into(const std::int32_t* c, const float* dx, const float* sx, const float* dw, const float* mw, bool offset,
                                __m512 acc[16]) {
  const __m512 vd = _mm512_loadu_ps(dw);
  const __m512 vm = _mm512_loadu_ps(mw);
  for (int m = 0; m < 16; ++m) {
    const __m512 prod = _mm512_cvtepi32_ps(_mm512_loadu_si512(c + 16 * m));
    acc[m] = _mm512_fmadd_ps(prod, _mm512_mul_ps(vd, _mm512_set1_ps(dx[m])), acc[m]);
    if (offset) acc[m] = _mm512_fmadd_ps(_mm512_set1_ps(sx[m]), vm, acc[m]);
  }
}

// Activation rows as the tiles read them: q [rows16 × in] (rows padded to 16 with zeros), and per
// row and 32-value sub-block dₓ and sₓ = dₓ · Σq, laid out [rows16 / 16][nsb][16] so that one
// tile's 16 rows of one sub-block are adjacent.
struct Activations {
  std::int64_t rows16 = 0, nsb = 0;
  std::vector<std::int8_t> q;
  std::vector<float> dx, sx;
};

void quantize_rows(GgmlType type, const float* x, std::int64_t rows, std::int64_t in, Activations& a) {
  a.rows16 = (rows + 15) / 16 * 16;
  a.nsb = in / 32;
  a.q.assign(static_cast<std::size_t>(a.rows16 * in), 0);
  a.dx.assign(static_cast<std::size_t>(a.rows16 * a.nsb), 0.0f);
  a.sx.assign(static_cast<std::size_t>(a.rows16 * a.nsb), 0.0f);
  at::parallel_for(0, rows, 16, [&](std::int64_t r0, std::int64_t r1) {
    QuantizedActivation xq;
    for (std::int64_t r = r0; r < r1; ++r) {
      quantize_activation(type, x + r * in, in, xq, QuantIsa::kVnni);
      std::memcpy(a.q.data() + r * in, xq.q.data(), static_cast<std::size_t>(in));
      for (std::int64_t sb = 0; sb < a.nsb; ++sb) {
        const float d = xq.d[static_cast<std::size_t>(sb * 32 / xq.block)];
        int s = 0;
        for (int i = 0; i < 32; ++i) s += xq.q[static_cast<std::size_t>(sb * 32 + i)];
        const std::int64_t at = ((r / 16) * a.nsb + sb) * 16 + r % 16;
        a.dx[at] = d;
        a.sx[at] = d * static_cast<float>(s);
      }
    }
  });
}

LUKA_AMX void panel_product(const Activations& a, const Panel& p, std::int64_t in, bool offset, std::int64_t rows,
                            std::int64_t out, std::int64_t n0, float* y) {
  alignas(64) std::int32_t c[2][256];
  const std::int64_t nsb = a.nsb;
  const int ncols = static_cast<int>(std::min<std::int64_t>(16, out - n0));
  const __mmask16 store_mask = static_cast<__mmask16>((1u << ncols) - 1);
  for (std::int64_t m0 = 0; m0 < a.rows16; m0 += 16) {
    __m512 acc[16];
    for (auto& v : acc) v = _mm512_setzero_ps();
    const std::int8_t* arow = a.q.data() + m0 * in;
    const float* dx = a.dx.data() + (m0 / 16) * nsb * 16;
    const float* sx = a.sx.data() + (m0 / 16) * nsb * 16;
    // Tiles 0 and 3 take sub-blocks sb and sb + 1; their sums are stored, the next pair's products
    // started, and the stored pair scaled while the tiles compute.
    const auto start = [&](std::int64_t sb) {
      _tile_zero(0);
      _tile_loadd(1, arow + sb * 32, in);
      _tile_loadd(2, p.b.data() + sb * 512, 64);
      _tile_dpbssd(0, 1, 2);
      if (sb + 1 < nsb) {
        _tile_zero(3);
        _tile_loadd(4, arow + sb * 32 + 32, in);
        _tile_loadd(5, p.b.data() + sb * 512 + 512, 64);
        _tile_dpbssd(3, 4, 5);
      }
    };
    start(0);
    for (std::int64_t sb = 0; sb < nsb; sb += 2) {
      const bool pair = sb + 1 < nsb;
      _tile_stored(0, c[0], 64);
      if (pair) _tile_stored(3, c[1], 64);
      if (sb + 2 < nsb) start(sb + 2);
      scale_into(c[0], dx + sb * 16, sx + sb * 16, p.d.data() + sb * 16, p.m.data() + sb * 16, offset, acc);
      if (pair) scale_into(c[1], dx + sb * 16 + 16, sx + sb * 16 + 16, p.d.data() + sb * 16 + 16, p.m.data() + sb * 16 + 16, offset, acc);
    }
    for (int m = 0; m < 16 && m0 + m < rows; ++m) _mm512_mask_storeu_ps(y + (m0 + m) * out + n0, store_mask, acc[m]);
  }
}

LUKA_AMX void load_tile_config(const TileConfig& c) { _tile_loadconfig(&c); }
LUKA_AMX void release_tiles() { _tile_release(); }

}  // namespace

bool amx_gemm_supports(GgmlType type) {
  return type == GgmlType::kQ4_0 || type == GgmlType::kQ4_1 || type == GgmlType::kQ8_0 || type == GgmlType::kQ4_K;
}

void amx_gemm(GgmlType type, const void* w, std::int64_t out, std::int64_t in, const float* x, std::int64_t rows, float* y) {
  Activations a;
  quantize_rows(type, x, rows, in, a);
  const bool offset = type == GgmlType::kQ4_1 || type == GgmlType::kQ4_K;
  const auto* base = static_cast<const std::uint8_t*>(w);
  const std::int64_t panels = (out + 15) / 16;
  const TileConfig config = tile_config();
  at::parallel_for(0, panels, 1, [&](std::int64_t p0, std::int64_t p1) {
    load_tile_config(config);  // per thread: the tile configuration is thread state
    Panel panel;
    for (std::int64_t p = p0; p < p1; ++p) {
      repack_panel(type, base, out, in, 16 * p, panel);
      panel_product(a, panel, in, offset, rows, out, 16 * p, y);
    }
    release_tiles();
  });
}

#undef LUKA_AMX

}  // namespace luka::cpu::detail
