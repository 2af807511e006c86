// Pre-tokenizer splits checked against the Rust library: the expected pieces were produced with
// tokenizers' Tokenizer.from_file(qwen3 tokenizer.json).pre_tokenizer.pre_tokenize_str(text),
// mapped back to text through the returned offsets.
#include <gtest/gtest.h>

#include "core/tokenizer/pre_tokenizer.h"
#include "core/util/error.h"

namespace luka {
namespace {

struct SplitCase {
  std::string text;
  std::vector<std::string> pieces;
};

const std::vector<SplitCase>& reference_cases() {
  static const std::vector<SplitCase> cases = {
    {"I'M you'RE it'S 'sup 'll we'Ve", {"I", "'M", " you", "'RE", " it", "'S", " '", "sup", " '", "ll", " we", "'Ve"}},
    {"hello   world  \n\n  x", {"hello", "  ", " world", "  \n\n", " ", " x"}},
    {"a \r\n\t b", {"a", " \r\n", "\t", " b"}},
    {"  \u00A0x", {"  ", "\u00A0x"}},
    {"x\u0085\u2028y", {"x", "\u0085", "\u2028y"}},
    {"1234 ab12 \u0663\u2167\u00BD", {"1", "2", "3", "4", " ab", "1", "2", " ", "\u0663", "\u2167", "\u00BD"}},
    {"...!!  ?? \n\nz", {"...!!", " ", " ??", " \n\n", "z"}},
    {"\t\tfoo", {"\t", "\tfoo"}},
    {"end  ", {"end", "  "}},
    {"x'\u017Ftop", {"x", "'\u017F", "top"}},
    {"x'\uFB06x", {"x", "'\uFB06x"}},
    {"\u00FCber na\u00EFve \u4F60\u597D\u4E16\u754C", {"\u00FCber", " na\u00EFve", " \u4F60\u597D\u4E16\u754C"}},
    {"\uFEFFbom \uFEFF", {"\uFEFFbom", " \uFEFF"}},
    {" ;\n\n\nx", {" ;\n\n\n", "x"}},
    {"a\n \n b", {"a", "\n \n", " b"}},
    {"$100.00", {"$", "1", "0", "0", ".", "0", "0"}},
    {"\u2029\u2029a", {"\u2029", "\u2029a"}},
    {"e\u0301", {"e", "\u0301"}},
    {"x'ss", {"x", "'s", "s"}},
    {"  \n  ", {"  \n", "  "}},
    {" \t\n\t x", {" \t\n", "\t", " x"}},
    {"\u3000\u3000\u4E2D", {"\u3000", "\u3000\u4E2D"}},
    {"(foo)\r\n\r\n", {"(foo", ")\r\n\r\n"}},
    {"a -> b", {"a", " ->", " b"}},
    {"\U0001F389\U0001F389 ok", {"\U0001F389\U0001F389", " ok"}},
    {"'", {"'"}},
    {"' ", {"'", " "}},
    {"\r", {"\r"}},
    {"x\U000105C0x \U00010D40\U00010D41", {"x\U000105C0x", " ", "\U00010D40", "\U00010D41"}},
    {"'S\u017F '\u017Ftop", {"'S", "\u017F", " '", "\u017Ftop"}},
  };
  return cases;
}

TEST(Qwen2PreTokenizer, MatchesRustSplits) {
  const auto pre = PreTokenizer::for_pattern(Qwen2PreTokenizer::pattern(), "test");
  for (const SplitCase& c : reference_cases()) {
    std::vector<std::string_view> views;
    pre->split(c.text, views);
    const std::vector<std::string> pieces(views.begin(), views.end());
    EXPECT_EQ(pieces, c.pieces) << "text: " << c.text;
  }
}

TEST(Qwen2PreTokenizer, UnknownPatternIsAnErrorNamingTheFile) {
  try {
    PreTokenizer::for_pattern("\\p{L}+", "some/tokenizer.json");
    FAIL() << "expected luka::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("some/tokenizer.json"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace luka
