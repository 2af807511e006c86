// A named, coloured span of a prompt's tokens (a topic segment of an interwoven prompt).
#pragma once

#include <cstdint>
#include <string>

namespace luka {

struct TokenSegment {
  std::string label;
  std::string colour;               // "#rrggbb"
  std::int64_t begin = 0, end = 0;  // token span [begin, end)
};

}  // namespace luka
