// Token byte offsets (Tokenizer::encode_with_offsets) against Hugging Face `tokenizers`: the
// reference offsets are made by tests/fixtures/offsets_reference.py (the project's virtualenv) into
// the test work folder and converted there from characters to UTF-8 bytes.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/tokenizer/byte_level.h"
#include "core/tokenizer/unicode.h"
#include "tests/core/tokenizer/test_util.h"
#include "tests/python_reference.h"

namespace luka {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kGolden = fs::path(LUKA_SHARED_DATA) / "tokenizer-golden" / "qwen3-dev.jsonl";
const fs::path kWikiSalad = fs::path(LUKA_SHARED_DATA) / "wikisalad";
const fs::path kSmolLM2 = fs::path(LUKA_SOURCE_DIR) / "models" / "smollm2-135m-instruct" / "SmolLM2-135M-Instruct.Q4_1.gguf";

// The reference offsets of one tokenizer (`kind` as offsets_reference.py names it).
fs::path offsets_reference(const std::string& kind, const fs::path& tokenizer, std::string& why_missing) {
  return test::python_reference(LUKA_OFFSETS_REFERENCE_SCRIPT,
                                {kind, tokenizer.string(), kGolden.string(), kWikiSalad.string()},
                                fs::path(LUKA_TEST_WORK) / ("offsets_" + kind + ".json"), why_missing);
}

std::string describe(const std::vector<TokenSpan>& spans, std::size_t limit = 12) {
  std::string s;
  for (std::size_t i = 0; i < spans.size() && i < limit; ++i)
    s += std::to_string(spans[i].id) + "[" + std::to_string(spans[i].begin) + "," + std::to_string(spans[i].end) + ") ";
  return s + (spans.size() > limit ? "..." : "");
}

// Compares every case of a reference file. `nfc`: the tokenizer normalizes, so some marks must
// have been composed away.
void expect_matches_reference(const Tokenizer& tok, const fs::path& reference, std::size_t min_cases, bool nfc) {
  std::ifstream in(reference, std::ios::binary);
  ASSERT_TRUE(in) << reference;
  const json cases = json::parse(in);
  ASSERT_GE(cases.size(), min_cases);
  std::size_t ok = 0, with_gaps = 0, partial_chars = 0;
  std::vector<std::string> failures;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const std::string text = cases[i].at("text").get<std::string>();
    const auto ids = cases[i].at("ids").get<std::vector<std::int32_t>>();
    const auto offsets = cases[i].at("offsets").get<std::vector<std::size_t>>();
    std::vector<TokenSpan> want;
    for (std::size_t k = 0; k < ids.size(); ++k) want.push_back({ids[k], offsets[2 * k], offsets[2 * k + 1]});
    const std::vector<TokenSpan> got = tok.encode_with_offsets(text);
    bool same = got.size() == want.size();
    for (std::size_t k = 0; same && k < got.size(); ++k)
      same = got[k].id == want[k].id && got[k].begin == want[k].begin && got[k].end == want[k].end;
    std::vector<std::int32_t> got_ids;
    for (const TokenSpan& s : got) got_ids.push_back(s.id);
    same = same && got_ids == tok.encode(text);
    if (same) {
      ++ok;
      for (std::size_t k = 1; k < got.size(); ++k) {
        with_gaps += got[k].begin > got[k - 1].end;
        partial_chars += got[k].begin < got[k - 1].end;  // two byte tokens of one character
      }
    } else if (failures.size() < 5) {
      failures.push_back("case " + std::to_string(i) + " " + json(text).dump().substr(0, 160) + "\n  want " +
                         describe(want) + "\n  got  " + describe(got));
    }
  }
  std::string report;
  for (const std::string& f : failures) report += f + "\n";
  std::printf("%s: %zu/%zu cases with the reference's ids and offsets (%zu gaps after NFC composition, %zu "
              "characters shared by byte tokens)\n",
              reference.filename().c_str(), ok, cases.size(), with_gaps, partial_chars);
  EXPECT_EQ(ok, cases.size()) << report;
  // The reference set must exercise the hard cases, or the comparison proves little.
  if (nfc) EXPECT_GT(with_gaps, 0u);
  EXPECT_GT(partial_chars, 100u);
}

TEST(TokenOffsets, Qwen3MatchesHuggingFaceTokenizers) {
  LUKA_REQUIRE_QWEN3();
  if (!fs::exists(kGolden) || !fs::exists(kWikiSalad))
    GTEST_SKIP() << "shared data incomplete: need " << kGolden << " and " << kWikiSalad << " (set LUKA_SHARED_DATA)";
  std::string why;
  const fs::path reference = offsets_reference("qwen3", test::qwen3_dir(), why);
  if (reference.empty()) GTEST_SKIP() << why;
  expect_matches_reference(*test::qwen3(), reference, 12779 + 8, true);
}

TEST(TokenOffsets, SmolLM2GgufMatchesTransformers) {
  if (!fs::exists(kSmolLM2)) GTEST_SKIP() << "no SmolLM2 GGUF at " << kSmolLM2 << " (scripts/setup.sh)";
  if (!fs::exists(kGolden) || !fs::exists(kWikiSalad))
    GTEST_SKIP() << "shared data incomplete: need " << kGolden << " and " << kWikiSalad << " (set LUKA_SHARED_DATA)";
  std::string why;
  const fs::path reference = offsets_reference("smollm2", kSmolLM2, why);
  if (reference.empty()) GTEST_SKIP() << why;
  expect_matches_reference(Tokenizer::load(kSmolLM2), reference, 12779 + 8, false);
}

// The offsets replay the Rust normalizer step by step; the text it gives must be the one encode()
// tokenizes, or the tokenizer falls back to whole-piece spans.
TEST(TokenOffsets, NfcReplayGivesTheNormalizedText) {
  if (!fs::exists(kGolden)) GTEST_SKIP() << "golden file not found at " << kGolden << " (set LUKA_SHARED_DATA)";
  std::ifstream in(kGolden, std::ios::binary);
  std::string line;
  std::size_t changed = 0, checked = 0;
  while (std::getline(in, line)) {  // '\n' only: texts hold raw U+2028 and U+0085
    if (line.empty()) continue;
    const std::string text = json::parse(line).at("text").get<std::string>();
    if (!unicode::is_valid_utf8(text)) continue;
    std::vector<unicode::ByteRange> origins;
    const std::string replayed = unicode::nfc_aligned(text, origins);
    ASSERT_EQ(replayed, unicode::nfc(text)) << json(text).dump();
    ASSERT_EQ(origins.size(), replayed.size());
    for (std::size_t i = 1; i < origins.size(); ++i) ASSERT_LE(origins[i - 1].begin, origins[i].begin);
    for (const unicode::ByteRange& r : origins) ASSERT_LE(r.end, text.size());
    changed += replayed != text;
    ++checked;
  }
  EXPECT_GT(checked, 12000u);
  EXPECT_GT(changed, 100u) << "the golden set should hold text that NFC changes";
}

// Known answers that need no reference run.
TEST(TokenOffsets, Qwen3KnownSpans) {
  LUKA_REQUIRE_QWEN3();
  const Tokenizer& tok = *test::qwen3();
  using Spans = std::vector<std::pair<std::size_t, std::size_t>>;
  const auto spans = [&](const std::string& text) {
    Spans out;
    for (const TokenSpan& s : tok.encode_with_offsets(text)) out.emplace_back(s.begin, s.end);
    return out;
  };
  EXPECT_EQ(spans("Hello world"), (Spans{{0, 5}, {5, 11}}));
  EXPECT_EQ(spans("<|im_start|>user\nHi<|im_end|>"), (Spans{{0, 12}, {12, 16}, {16, 17}, {17, 19}, {19, 29}}));
  // U+11935 is three byte-level tokens: every piece of a character covers the whole character.
  EXPECT_EQ(spans("\U00011935"), (Spans{{0, 4}, {0, 4}, {0, 4}}));
  // NFC composes e + U+0301 into é: the é token covers only the "e"; the mark's bytes belong to none.
  EXPECT_EQ(spans("e\xCC\x81x"), (Spans{{0, 1}, {3, 4}}));
  // Invalid UTF-8 is repaired to U+FFFD; offsets still index the input bytes.
  const std::string bad = "a\xE4z";
  const std::vector<TokenSpan> got = tok.encode_with_offsets(bad);
  std::vector<std::int32_t> ids;
  for (const TokenSpan& s : got) ids.push_back(s.id);
  EXPECT_EQ(ids, tok.encode(bad));
  EXPECT_EQ(got.front().begin, 0u);
  EXPECT_EQ(got.back().end, bad.size());
  for (std::size_t k = 1; k < got.size(); ++k) EXPECT_LE(got[k - 1].begin, got[k].begin);
  EXPECT_TRUE(tok.encode_with_offsets("").empty());
}

// A tiny tokenizer.json with a missing byte and an unknown token, to check fused-unknown spans.
TEST(TokenOffsets, FusedUnknownTokenCoversItsBytes) {
  const fs::path dir = fs::path(LUKA_TEST_WORK) / "tokenizer" / "offsets_unk";
  fs::create_directories(dir);
  json vocab = json::object();
  for (int b = 0; b < 256; ++b)
    if (b < 0x80) vocab[byte_level::byte_to_text(static_cast<unsigned char>(b))] = b;  // no bytes >= 0x80
  vocab["ab"] = 256;
  vocab["<unk>"] = 257;
  const json j = {
      {"added_tokens", json::array({{{"id", 258}, {"content", "<|end|>"}, {"special", true}, {"normalized", false}}})},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"model",
       {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array({"a b"})}, {"unk_token", "<unk>"}, {"fuse_unk", true}}}};
  std::ofstream(dir / "tokenizer.json", std::ios::binary) << j.dump();
  const Tokenizer tok = Tokenizer::load(dir);
  // "ab" "é"(2 bytes, both unknown, fused) "ab" <|end|> " c"
  const std::string text = "ab\xC3\xA9" "ab<|end|> c";
  const std::vector<TokenSpan> got = tok.encode_with_offsets(text);
  ASSERT_EQ(got.size(), 6u) << describe(got);
  const std::vector<TokenSpan> want = {{256, 0, 2}, {257, 2, 4}, {256, 4, 6}, {258, 6, 13}, {' ', 13, 14}, {'c', 14, 15}};
  for (std::size_t k = 0; k < want.size(); ++k) {
    EXPECT_EQ(got[k].id, want[k].id) << k;
    EXPECT_EQ(got[k].begin, want[k].begin) << k;
    EXPECT_EQ(got[k].end, want[k].end) << k;
  }
}

}  // namespace
}  // namespace luka
