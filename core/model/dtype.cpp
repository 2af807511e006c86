#include "core/model/dtype.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "core/util/error.h"

namespace luka {

const char* to_string(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "fp32";
    case DType::kBF16: return "bf16";
    case DType::kF16: return "fp16";
  }
  return "?";
}

DType parse_dtype(std::string_view text) {
  std::string t(text);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  if (t == "fp32" || t == "float32" || t == "f32") return DType::kF32;
  if (t == "bf16" || t == "bfloat16") return DType::kBF16;
  if (t == "fp16" || t == "float16" || t == "f16" || t == "half") return DType::kF16;
  fail("dtype", "unknown dtype '" + std::string(text) + "' (expected fp32, bf16 or fp16)");
}

}  // namespace luka
