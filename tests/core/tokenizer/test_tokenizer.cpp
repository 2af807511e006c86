// Tokenizer tests: golden ids from the Rust `tokenizers` library, decoding, streaming, bad files.
#include <gtest/gtest.h>

#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/tokenizer/byte_level.h"
#include "core/tokenizer/unicode.h"
#include "core/util/error.h"
#include "tests/core/tokenizer/test_util.h"

namespace luka {
namespace {

namespace fs = std::filesystem;
using test::qwen3;

// NFC straight from ICU, independent of the tokenizer's own normalizer path.
std::string icu_nfc(const std::string& text) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
  EXPECT_TRUE(U_SUCCESS(status));
  const icu::UnicodeString normalized = nfc->normalize(icu::UnicodeString::fromUTF8(text), status);
  EXPECT_TRUE(U_SUCCESS(status));
  std::string out;
  normalized.toUTF8String(out);
  return out;
}

// What decoding the golden ids must give: the text with its added tokens (<|im_start|>, <think>,
// ...) kept verbatim and every stretch between them NFC'd on its own, since the tokenizer cuts
// added tokens out of the raw text before normalizing (so "<|endoftext|>" + U+0338 stays apart).
std::string expected_decode(const Tokenizer& tok, const std::string& text) {
  std::vector<std::string> added;
  for (std::int32_t id = 151643; id < tok.vocab_size(); ++id) added.push_back(tok.token_text(id));
  std::sort(added.begin(), added.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
  std::string out, segment;
  for (std::size_t pos = 0; pos < text.size();) {
    const auto hit = std::find_if(added.begin(), added.end(),
                                  [&](const std::string& a) { return text.compare(pos, a.size(), a) == 0; });
    if (hit == added.end()) {
      segment += text[pos++];
      continue;
    }
    out += icu_nfc(segment) + *hit;
    segment.clear();
    pos += hit->size();
  }
  return out + icu_nfc(segment);
}

std::string ids_to_string(const std::vector<std::int32_t>& ids, std::size_t limit = 40) {
  std::string s = "[";
  for (std::size_t i = 0; i < ids.size() && i < limit; ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s + (ids.size() > limit ? ",...]" : "]");
}

// The id of the token made of the single raw byte `b`.
std::int32_t byte_token(const Tokenizer& tok, unsigned char b) {
  return tok.token_id(byte_level::byte_to_text(b)).value();
}

TEST(TokenizerGolden, MatchesRustTokenizersOnEveryLine) {
  LUKA_REQUIRE_QWEN3();
  const fs::path golden = fs::path(LUKA_SHARED_DATA) / "tokenizer-golden" / "qwen3-dev.jsonl";
  if (!fs::exists(golden)) GTEST_SKIP() << "golden file not found at " << golden;
  std::ifstream in(golden, std::ios::binary);
  ASSERT_TRUE(in) << golden;

  std::vector<std::pair<std::string, std::vector<std::int32_t>>> cases;
  std::string line;
  while (std::getline(in, line)) {  // '\n' only: texts hold raw U+2028 and U+0085
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line);
    cases.emplace_back(j.at("text").get<std::string>(), j.at("ids").get<std::vector<std::int32_t>>());
  }
  ASSERT_EQ(cases.size(), 12779u);

  std::size_t encode_ok = 0, decode_ok = 0;
  std::vector<std::string> failures;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::vector<std::int32_t>> encoded;
  encoded.reserve(cases.size());
  for (const auto& [text, ids] : cases) encoded.push_back(qwen3()->encode(text));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& [text, ids] = cases[i];
    if (encoded[i] == ids) {
      ++encode_ok;
    } else if (failures.size() < 5) {
      failures.push_back("encode line " + std::to_string(i + 1) + " " + nlohmann::json(text).dump().substr(0, 200) +
                         "\n  want " + ids_to_string(ids) + "\n  got  " + ids_to_string(encoded[i]));
    }
    const std::string decoded = qwen3()->decode(ids);
    if (decoded == expected_decode(*qwen3(), text)) {
      ++decode_ok;
    } else if (failures.size() < 10) {
      failures.push_back("decode line " + std::to_string(i + 1) + " " + nlohmann::json(text).dump().substr(0, 200));
    }
  }
  std::string report;
  for (const std::string& f : failures) report += f + "\n";
  std::printf("golden: %zu/%zu encoded exactly, %zu/%zu decoded to NFC(text), encode took %.3f s\n", encode_ok,
              cases.size(), decode_ok, cases.size(), seconds);
  EXPECT_EQ(encode_ok, cases.size()) << report;
  EXPECT_EQ(decode_ok, cases.size()) << report;
}

TEST(Tokenizer, KnownIdsAndSpecialTokens) {
  LUKA_REQUIRE_QWEN3();
  const Tokenizer& tok = *qwen3();
  EXPECT_EQ(tok.vocab_size(), 151669);
  EXPECT_EQ(tok.token_id("<|im_start|>"), 151644);
  EXPECT_EQ(tok.token_id("<think>"), 151667);
  EXPECT_TRUE(tok.is_special(151644));
  EXPECT_FALSE(tok.is_special(151667));  // added but not special
  EXPECT_FALSE(tok.is_special(9707));
  EXPECT_EQ(tok.token_text(9707), "Hello");
  EXPECT_EQ(tok.token_bytes(220), " ");
  EXPECT_EQ(tok.token_text(220), "\xC4\xA0");  // "Ġ"
  EXPECT_EQ(tok.encode("Hello world"), (std::vector<std::int32_t>{9707, 1879}));
  // Added tokens are cut out of the raw text, even glued to words.
  EXPECT_EQ(tok.encode("<|im_start|>user\nHi<|im_end|>"),
            (std::vector<std::int32_t>{151644, 872, 198, 13048, 151645}));
  EXPECT_EQ(tok.encode("a<think>b"), (std::vector<std::int32_t>{64, 151667, 65}));
  EXPECT_EQ(tok.decode({151644, 872, 198, 13048, 151645}), "<|im_start|>user\nHi<|im_end|>");
  EXPECT_THROW(tok.token_text(tok.vocab_size()), Error);
  EXPECT_THROW(tok.decode({-1}), Error);

  EXPECT_EQ(tok.config().eos_token, "<|im_end|>");
  EXPECT_EQ(tok.config().pad_token, "<|endoftext|>");
  EXPECT_FALSE(tok.config().bos_token.has_value());
  EXPECT_NE(tok.config().chat_template.find("enable_thinking"), std::string::npos);
  EXPECT_EQ(tok.source(), test::qwen3_dir() / "tokenizer.json");
}

// Where ICU 72 (Unicode 15.0) and the Rust library's tables (Oniguruma: Unicode 16; NFC:
// an older Unicode) disagree. Expected ids from tokenizers 0.22.2, add_special_tokens=False.
TEST(Tokenizer, UnicodeVersionEdgesMatchRust) {
  LUKA_REQUIRE_QWEN3();
  const Tokenizer& tok = *qwen3();
  using Ids = std::vector<std::int32_t>;
  // Known marks reorder and compose as usual.
  EXPECT_EQ(tok.encode("a\u0301\u0334"), (Ids{1953, 136, 112}));
  // U+1AC0 (Unicode 14) is a starter to the Rust normalizer: no reordering around it.
  EXPECT_EQ(tok.encode("a\u1AC0\u0334 e\u0301\u1AC0\u0334"),
            (Ids{64, 157, 104, 222, 136, 112, 3958, 157, 104, 222, 136, 112}));
  // The Dives Akuru composition (Unicode 13) is not applied.
  EXPECT_EQ(tok.encode("\U00011935\U00011930"), (Ids{128240, 97, 113, 128240, 97, 108}));
  // Todhri letters and Garay digits (Unicode 16) are \p{L} and \p{N} to the regex.
  EXPECT_EQ(tok.encode("x\U000105C0x \U00010D40\U00010D41"),
            (Ids{87, 123934, 245, 222, 87, 220, 123934, 113, 222, 123934, 113, 223}));
  // (?i) contractions: 'S, and U+017F LONG S folds to 's'.
  EXPECT_EQ(tok.encode("'S\u017f '\u017ftop"), (Ids{13272, 144815, 364, 144815, 3481}));
  EXPECT_EQ(tok.encode("x'\u017ftop\u0085 \u2028\n"), (Ids{87, 6, 144815, 3481, 126, 227, 636, 101, 198}));
}

TEST(Tokenizer, LoadsFromFilePath) {
  LUKA_REQUIRE_QWEN3();
  const Tokenizer tok = Tokenizer::load(test::qwen3_dir() / "tokenizer.json");
  EXPECT_EQ(tok.encode("Hello world"), (std::vector<std::int32_t>{9707, 1879}));
  EXPECT_EQ(tok.config().eos_token, "<|im_end|>");  // config found beside the file
}

// add_bos_token: sequence_bos() is the BOS token's id, and with_sequence_bos puts it in front once
// (not again before a text that starts with it, not into an empty list); without the flag, or
// without a BOS token, nothing is added.
TEST(Tokenizer, SequenceBosOnlyWhenTheConfigAsks) {
  LUKA_REQUIRE_QWEN3();
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("luka-bos-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(test::qwen3_dir() / "tokenizer.json", dir / "tokenizer.json",
                             std::filesystem::copy_options::overwrite_existing);
  const auto with_config = [&](const std::string& config) {
    std::ofstream(dir / "tokenizer_config.json") << config;
    return Tokenizer::load(dir);
  };
  const Tokenizer asks = with_config(R"({"add_bos_token": true, "bos_token": "<|im_start|>"})");
  const std::int32_t bos = *asks.token_id("<|im_start|>");
  EXPECT_EQ(asks.sequence_bos(), bos);
  EXPECT_EQ(asks.with_sequence_bos(asks.encode("Hello world")), (std::vector<std::int32_t>{bos, 9707, 1879}));
  EXPECT_EQ(asks.with_sequence_bos(asks.encode("<|im_start|>Hello world")), (std::vector<std::int32_t>{bos, 9707, 1879}));
  EXPECT_EQ(asks.with_sequence_bos({}), std::vector<std::int32_t>{});
  for (const char* config : {R"({"add_bos_token": false, "bos_token": "<|im_start|>"})", R"({"add_bos_token": true})"}) {
    const Tokenizer plain = with_config(config);
    EXPECT_EQ(plain.sequence_bos(), std::nullopt) << config;
    EXPECT_EQ(plain.with_sequence_bos(plain.encode("Hello world")), (std::vector<std::int32_t>{9707, 1879})) << config;
  }
  std::filesystem::remove_all(dir);
}

TEST(Tokenizer, DecodeReplacesInvalidUtf8LikeRust) {
  LUKA_REQUIRE_QWEN3();
  const Tokenizer& tok = *qwen3();
  const auto bytes = [&](std::initializer_list<unsigned char> bs) {
    std::vector<std::int32_t> ids;
    for (unsigned char b : bs) ids.push_back(byte_token(tok, b));
    return ids;
  };
  // Expected strings are what Rust's String::from_utf8_lossy gives (one U+FFFD per maximal subpart).
  EXPECT_EQ(tok.decode(bytes({0xE4, 'a'})), "\xEF\xBF\xBD" "a");
  EXPECT_EQ(tok.decode(bytes({0xF0, 0x9F, 0x98, 'x'})), "\xEF\xBF\xBD" "x");
  EXPECT_EQ(tok.decode(bytes({0xE0, 0x80, 'x'})), "\xEF\xBF\xBD\xEF\xBF\xBD" "x");  // overlong
  EXPECT_EQ(tok.decode(bytes({0xED, 0xA0, 0x80})), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(tok.decode(bytes({0xFF, 0xC3, 0xA9})), "\xEF\xBF\xBD\xC3\xA9");
  EXPECT_EQ(tok.decode(bytes({0xF0, 0x9F, 0x98, 0x80})), "\xF0\x9F\x98\x80");
}

TEST(StreamDecoder, YieldsTheFullDecodeOneTokenAtATime) {
  LUKA_REQUIRE_QWEN3();
  const Tokenizer& tok = *qwen3();
  const std::vector<std::string> texts = {
      "你好，世界！这是一个测试。", "🎉🦀👨‍👩‍👧‍👦 emoji 𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "ça va? Ünïcödé ∑∫√ 日本語のテキスト",
      "<|im_start|>assistant\n<think>\n思考中🤔\n</think>\n\n答え<|im_end|>"};
  for (const std::string& text : texts) {
    SCOPED_TRACE(text);
    const std::vector<std::int32_t> ids = tok.encode(text);
    StreamDecoder stream(tok);
    std::string streamed;
    int held_back = 0;  // pushes that had to wait for the rest of a character
    for (std::int32_t id : ids) {
      const std::string piece = stream.push(id);
      if (piece.empty()) ++held_back;
      EXPECT_EQ(piece.find("\xEF\xBF\xBD"), std::string::npos) << "partial character emitted";
      EXPECT_TRUE(unicode::is_valid_utf8(piece)) << "invalid UTF-8 emitted";
      streamed += piece;
    }
    streamed += stream.finish();
    EXPECT_EQ(streamed, tok.decode(ids));
    EXPECT_EQ(streamed, text);
    if (text.rfind("🎉", 0) == 0) EXPECT_GT(held_back, 0) << "emoji should span byte tokens";
  }
}

TEST(StreamDecoder, ByteByByteAndIncompleteEnd) {
  LUKA_REQUIRE_QWEN3();
  const Tokenizer& tok = *qwen3();
  StreamDecoder stream(tok);
  // U+1F600 as four single-byte tokens: nothing until the last byte.
  EXPECT_EQ(stream.push(byte_token(tok, 0xF0)), "");
  EXPECT_EQ(stream.push(byte_token(tok, 0x9F)), "");
  EXPECT_EQ(stream.push(byte_token(tok, 0x98)), "");
  EXPECT_EQ(stream.push(byte_token(tok, 0x80)), "\xF0\x9F\x98\x80");
  // A byte that can never start a character is replaced at once.
  EXPECT_EQ(stream.push(byte_token(tok, 0xFF)), "\xEF\xBF\xBD");
  // An unfinished character at the end becomes U+FFFD.
  EXPECT_EQ(stream.push(byte_token(tok, 'a')), "a");
  EXPECT_EQ(stream.push(byte_token(tok, 0xE4)), "");
  EXPECT_EQ(stream.finish(), "\xEF\xBF\xBD");
  EXPECT_EQ(stream.finish(), "");
  // A lead byte followed by a non-continuation: the lead is replaced, the rest kept.
  EXPECT_EQ(stream.push(byte_token(tok, 0xE4)), "");
  EXPECT_EQ(stream.push(byte_token(tok, 'b')), "\xEF\xBF\xBD" "b");
}

// --- bad files -------------------------------------------------------------------------------

class BadTokenizerFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(LUKA_TEST_WORK) / "tokenizer" /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }

  // A tiny but valid byte-level BPE tokenizer.json with the Qwen pattern and one merge "a b".
  static nlohmann::json minimal() {
    nlohmann::json vocab = nlohmann::json::object();
    for (int b = 0; b < 256; ++b) vocab[byte_level::byte_to_text(static_cast<unsigned char>(b))] = b;
    vocab["ab"] = 256;
    return {
        {"version", "1.0"},
        {"added_tokens", nlohmann::json::array({{{"id", 257}, {"content", "<|end|>"}, {"special", true},
                                                  {"normalized", false}}})},
        {"normalizer", {{"type", "NFC"}}},
        {"pre_tokenizer",
         {{"type", "Sequence"},
          {"pretokenizers",
           nlohmann::json::array(
               {{{"type", "Split"},
                 {"pattern",
                  {{"Regex",
                    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}}},
                 {"behavior", "Isolated"},
                 {"invert", false}},
                {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}})}}},
        {"decoder", {{"type", "ByteLevel"}}},
        {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array({"a b"})}}}};
  }

  fs::path write(const std::string& content, const std::string& name = "tokenizer.json") {
    const fs::path file = dir_ / name;
    std::ofstream(file, std::ios::binary) << content;
    return file;
  }

  // Loads and returns the error message (empty when it loaded).
  static std::string load_error(const fs::path& path) {
    try {
      Tokenizer::load(path);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
};

TEST_F(BadTokenizerFile, MinimalFileLoadsAndEncodes) {
  const fs::path file = write(minimal().dump());
  const Tokenizer tok = Tokenizer::load(dir_);
  EXPECT_EQ(tok.vocab_size(), 258);
  EXPECT_EQ(tok.encode("abc<|end|>"), (std::vector<std::int32_t>{256, 'c', 257}));
  EXPECT_EQ(tok.decode({256, 257}), "ab<|end|>");
  EXPECT_TRUE(tok.config().chat_template.empty());  // no tokenizer_config.json
  // Merges as [left, right] arrays work the same.
  nlohmann::json j = minimal();
  j["model"]["merges"] = nlohmann::json::array({nlohmann::json::array({"a", "b"})});
  write(j.dump());
  EXPECT_EQ(Tokenizer::load(file).encode("ab"), (std::vector<std::int32_t>{256}));
}

TEST_F(BadTokenizerFile, MissingFileNamesThePath) {
  const std::string err = load_error(dir_ / "nowhere");
  EXPECT_NE(err.find((dir_ / "nowhere").string()), std::string::npos) << err;
  EXPECT_NE(err.find("no such file or folder"), std::string::npos) << err;  // the path itself, not a tokenizer in it
  const std::string err_dir = load_error(dir_);  // folder without tokenizer.json
  EXPECT_NE(err_dir.find((dir_ / "tokenizer.json").string()), std::string::npos) << err_dir;
  EXPECT_NE(err_dir.find("not found"), std::string::npos) << err_dir;
}

TEST_F(BadTokenizerFile, MalformedJson) {
  const fs::path file = write("{\"model\": {\"type\": \"BPE\", ");
  const std::string err = load_error(file);
  EXPECT_NE(err.find(file.string()), std::string::npos) << err;
  EXPECT_NE(err.find("malformed JSON"), std::string::npos) << err;
}

TEST_F(BadTokenizerFile, ModelTypeNotBpe) {
  nlohmann::json j = minimal();
  j["model"]["type"] = "WordPiece";
  const fs::path file = write(j.dump());
  const std::string err = load_error(file);
  EXPECT_NE(err.find(file.string()), std::string::npos) << err;
  EXPECT_NE(err.find("WordPiece"), std::string::npos) << err;
}

TEST_F(BadTokenizerFile, UnknownPreTokenizerPattern) {
  nlohmann::json j = minimal();
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\w+|\\s+";
  const fs::path file = write(j.dump());
  const std::string err = load_error(file);
  EXPECT_NE(err.find(file.string()), std::string::npos) << err;
  EXPECT_NE(err.find("pattern"), std::string::npos) << err;
  EXPECT_NE(err.find("\\w+|\\s+"), std::string::npos) << err;

  j = minimal();
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  EXPECT_NE(load_error(write(j.dump())).find("pre_tokenizer"), std::string::npos);
}

// Two added tokens with one id made the id's text ambiguous; one text with two ids made its id
// ambiguous. Hugging Face's tokenizers accepts both; each is refused, naming the tokens.
TEST_F(BadTokenizerFile, AddedTokensHaveUniqueIdsAndContents) {
  nlohmann::json j = minimal();
  j["added_tokens"].push_back({{"id", 257}, {"content", "<|other|>"}, {"special", true}, {"normalized", false}});
  std::string e = load_error(write(j.dump()));
  EXPECT_NE(e.find("added tokens \"<|end|>\" and \"<|other|>\" share id 257"), std::string::npos) << e;
  j = minimal();
  j["added_tokens"].push_back({{"id", 258}, {"content", "<|end|>"}, {"special", true}, {"normalized", false}});
  e = load_error(write(j.dump()));
  EXPECT_NE(e.find("added token \"<|end|>\" appears twice, with ids 257 and 258"), std::string::npos) << e;
  j["added_tokens"][1]["content"] = "<|begin|>";
  EXPECT_EQ(load_error(write(j.dump())), "");
}

// A byte-level BPE spells every text with its 256 byte tokens; without one (and with no unknown
// token to stand for it) the byte vanished from every text that had it. Hugging Face's tokenizers
// accepts such a file; the error says so. An empty vocabulary lacks all 256.
TEST_F(BadTokenizerFile, ByteLevelVocabularyNeedsEveryByteToken) {
  nlohmann::json j = minimal();
  j["model"]["vocab"].erase(byte_level::byte_to_text(0xE9));
  std::string e = load_error(write(j.dump()));
  EXPECT_NE(e.find("lacks 1 of the 256 byte tokens (the first: byte 0xE9) and has no unknown token"), std::string::npos) << e;
  EXPECT_NE(e.find("Hugging Face's tokenizers accepts such a file"), std::string::npos) << e;
  j["model"]["vocab"] = nlohmann::json::object();
  j["model"]["merges"] = nlohmann::json::array();
  e = load_error(write(j.dump()));
  EXPECT_NE(e.find("lacks 256 of the 256 byte tokens (the first: byte 0x00)"), std::string::npos) << e;
  // With an unknown token the missing byte becomes it (TokenOffsets.FusedUnknownTokenCoversItsBytes).
  j = minimal();
  j["model"]["vocab"].erase(byte_level::byte_to_text(0xE9));
  j["model"]["vocab"]["<unk>"] = 300;
  j["model"]["unk_token"] = "<unk>";
  EXPECT_EQ(load_error(write(j.dump())), "");
}

TEST_F(BadTokenizerFile, WrongShapesNeverCrash) {
  const std::vector<std::string> bad = {
      "[]", "null", "{}", R"({"model": 3})", R"({"model": {"type": "BPE"}})",
      R"({"model": {"type": "BPE", "vocab": [], "merges": []}})"};
  for (const std::string& content : bad) {
    const fs::path file = write(content);
    EXPECT_NE(load_error(file).find(file.string()), std::string::npos) << content;
  }
  nlohmann::json j = minimal();
  j["model"]["merges"] = nlohmann::json::array({"a b c"});
  EXPECT_NE(load_error(write(j.dump())).find("merge"), std::string::npos);
  j = minimal();
  j["model"]["merges"] = nlohmann::json::array({"x yz"});  // "xyz" isn't in the vocab
  EXPECT_NE(load_error(write(j.dump())).find("merge"), std::string::npos);
  j = minimal();
  j["model"]["vocab"]["ab"] = "not an id";
  EXPECT_NE(load_error(write(j.dump())).find("ab"), std::string::npos);
  j = minimal();
  j["added_tokens"][0]["id"] = "x";
  EXPECT_NE(load_error(write(j.dump())).find("added token"), std::string::npos);
  // Ids are checked at their full width: 2^32 + 5 is not id 5 (Hugging Face's tokenizers refuses it).
  for (const std::uint64_t id : {(std::uint64_t{1} << 32) + 5, std::uint64_t{1} << 31, std::uint64_t{18446744073709551615u}}) {
    j = minimal();
    j["added_tokens"][0]["id"] = id;
    const std::string e = load_error(write(j.dump()));
    EXPECT_NE(e.find("invalid id " + std::to_string(id)), std::string::npos) << e;
    j = minimal();
    j["model"]["vocab"]["ab"] = id;
    EXPECT_NE(load_error(write(j.dump())).find("invalid id " + std::to_string(id)), std::string::npos);
  }
  j = minimal();
  j["added_tokens"][0]["id"] = -1;
  EXPECT_NE(load_error(write(j.dump())).find("invalid id -1"), std::string::npos);
  // Ids index dense tables: a hole of Qwen's size is fine, one id of a million in this 3 KB file
  // (a 70 MB table) is not.
  j = minimal();
  j["added_tokens"][0]["id"] = 151643;
  EXPECT_EQ(load_error(write(j.dump())), "");
  j["added_tokens"][0]["id"] = 1000000;
  EXPECT_NE(load_error(write(j.dump())).find("token id 1000000 is implausibly large for a file of"), std::string::npos);
  // Arrays nested 100,000 deep parse, and then overflowed the stack when the node was copied.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_NE(load_error(write(R"({"normalizer": )" + deep + "}")).find("JSON nested deeper than 256 levels"), std::string::npos);
  // A broken tokenizer_config.json is named too.
  write(minimal().dump());
  const fs::path config = write("{oops", "tokenizer_config.json");
  EXPECT_NE(load_error(dir_).find(config.string()), std::string::npos);
}

}  // namespace
}  // namespace luka
