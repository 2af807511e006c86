// Fuzz target for segments files (core/prompt/segments_file.cpp). The input is the file's text,
// then optionally a NUL byte and the prompt text it indexes (a fixed text with multi-byte
// characters otherwise). Any input must give a segment table or a luka::Error; a table that loads
// has ordered, non-overlapping spans inside the prompt, each holding its segment's text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/prompt/segments_file.h"
#include "core/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = input.find('\0');
  const std::string file(input.substr(0, nul));
  const std::string_view prompt =
      nul == std::string_view::npos ? std::string_view("Caf\xc3\xa9 au lait, na\xc3\xafve \xe2\x80\x94 \xf0\x9f\x99\x82 ok.\n\nQ?")
                                    : input.substr(nul + 1);
  try {
    const luka::SegmentTable table = luka::parse_segments_file(file, "fuzz/segments.json", prompt);
    if (table.spans.size() != table.segments.size()) std::abort();
    std::size_t last_end = 0;
    for (std::size_t i = 0; i < table.spans.size(); ++i) {
      const luka::SegmentSpan& s = table.spans[i];
      if (s.begin < last_end || s.begin >= s.end || s.end > prompt.size() ||
          prompt.substr(s.begin, s.end - s.begin) != table.segments[i].text)
        std::abort();
      last_end = s.end;
    }
  } catch (const luka::Error&) {
    // Rejected cleanly: the expected outcome for most inputs.
  }
  return 0;
}
