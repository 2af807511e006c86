// Fuzz target for a capture's consistency rules (captures/consistency.h) on decoded structures:
// the layout, the decode steps' token counts, the token, segment and page tables, as the reader
// hands them over after HDF5 has read them. It runs beside fuzz_capture_reader, which goes through
// HDF5 at a few hundred inputs a second; here the same rules run at HDF5-free speed.
//
// Input: a stream of small fields (see Bytes): mostly small integers around zero, where the rules'
// boundaries are, and sometimes any 64-bit value; each column's length is drawn on its own, so the
// columns of one table can disagree. Whatever the rules accept must hold their stated invariants;
// the target aborts where it does not.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "captures/consistency.h"
#include "core/util/error.h"

namespace {

// Fields read off the input; past its end every field reads 0.
class Bytes {
 public:
  Bytes(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::uint8_t byte() { return at_ < size_ ? data_[at_++] : 0; }
  // 0-249 read as -8..241 (small values, negatives included); 250-255 read the next 8 bytes whole.
  std::int64_t value() {
    const std::uint8_t b = byte();
    if (b < 250) return static_cast<std::int64_t>(b) - 8;
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = v << 8 | byte();
    std::int64_t s;
    std::memcpy(&s, &v, sizeof s);
    return s;
  }
  // A column length, at most `cap`.
  std::size_t length(std::size_t cap) { return byte() % (cap + 1); }
  template <typename T>
  std::vector<T> column(std::size_t n) {
    std::vector<T> v(n);
    for (T& x : v) x = static_cast<T>(value());
    return v;
  }
  std::string text(std::size_t n) {
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>(byte());
    return s;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t at_ = 0;
};

void require(bool holds) {
  if (!holds) std::abort();
}

template <typename F>
void rule(F&& f) {
  try {
    f();
  } catch (const luka::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace luka::capture;
  const std::string name = "fuzz.h5";
  Bytes in(data, size);
  constexpr std::size_t kCap = 48;

  Layout layout;
  layout.num_layers = static_cast<int>(in.value());
  layout.num_heads = static_cast<int>(in.value());
  layout.layers = in.column<int>(in.length(8));
  layout.heads = in.column<int>(in.length(8));
  layout.page_size = in.column<std::int64_t>(in.length(8));
  layout.prompt_tokens = in.value();
  rule([&] {
    check_layout(layout, name);
    require(layout.num_heads > 0 && layout.prompt_tokens >= 0 && layout.page_size.size() == layout.layers.size());
    require(std::is_sorted(layout.layers.begin(), layout.layers.end()) &&
            std::is_sorted(layout.heads.begin(), layout.heads.end()));
    for (const int l : layout.layers) require(l >= 0 && l < layout.num_layers);
    for (const int h : layout.heads) require(h >= 0 && h < layout.num_heads);
  });

  const std::int64_t num_tokens = in.value(), complete_steps = in.value(), version = 1 + in.byte() % 2;
  const auto step_tokens = in.column<std::int64_t>(in.length(kCap));
  rule([&] {
    check_step_tokens(step_tokens, num_tokens, name);
    for (const std::int64_t t : step_tokens) require(t >= 1 && t <= num_tokens);
  });

  TokenColumns tokens;
  tokens.ids = in.column<std::int32_t>(in.length(kCap));
  tokens.segments = in.column<std::int32_t>(in.length(kCap));
  tokens.probs = in.column<float>(in.length(kCap));
  tokens.generated = in.column<std::uint8_t>(in.length(kCap));
  tokens.piece_end = in.column<std::int64_t>(in.length(kCap));
  tokens.pieces = in.text(in.length(kCap));
  rule([&] {
    const std::vector<Token> out = tokens_from_columns(tokens, name);
    require(out.size() == tokens.ids.size());
    std::string joined;
    for (std::size_t i = 0; i < out.size(); ++i) {
      require(out[i].id == tokens.ids[i] && out[i].segment == tokens.segments[i]);
      joined += out[i].piece;
    }
    // The pieces tile the bytes from the start, in order.
    require(tokens.pieces.compare(0, joined.size(), joined) == 0);
  });

  SegmentColumns segments;
  segments.labels.resize(in.length(8));
  for (std::string& s : segments.labels) s = in.text(in.length(4));
  segments.colours.resize(in.length(8));
  segments.begin = in.column<std::int64_t>(in.length(8));
  segments.end = in.column<std::int64_t>(in.length(8));
  rule([&] {
    const std::vector<Segment> out = segments_from_columns(segments, num_tokens, name);
    require(out.size() == segments.labels.size());
    for (const Segment& s : out) require(s.begin >= 0 && s.begin <= s.end && s.end <= num_tokens);
  });

  PageColumns pages;
  const std::size_t n = in.length(kCap);
  // Most inputs keep the columns the same length, as the reader reads them; some do not.
  const bool ragged = in.byte() % 8 == 0;
  const auto len = [&] { return ragged ? in.length(kCap) : n; };
  pages.start = in.column<std::int64_t>(n);
  pages.end = in.column<std::int64_t>(len());
  pages.created = in.column<std::int64_t>(len());
  if (version >= 2) {
    pages.raw = in.column<std::uint8_t>(len());
    pages.member_end = in.column<std::int64_t>(len());
    pages.members = in.column<std::int64_t>(in.length(2 * kCap));
  }
  rule([&] {
    const std::vector<PageInfo> out = pages_from_columns(0, pages, version, complete_steps, num_tokens, name);
    require(out.size() <= pages.start.size());
    for (const PageInfo& p : out) {
      require(p.created_step >= 0 && p.created_step <= complete_steps);
      require(p.start >= 0 && p.start <= p.end && p.end <= num_tokens);
      for (std::size_t j = 0; j < p.members.size(); ++j)
        require(p.members[j] >= p.start && p.members[j] < p.end && (j == 0 || p.members[j] > p.members[j - 1]));
    }
  });
  return 0;
}
