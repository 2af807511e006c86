#include "core/tokenizer/tokenizer.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <type_traits>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/gguf/gguf.h"
#include "core/tokenizer/added_tokens.h"
#include "core/tokenizer/bpe.h"
#include "core/tokenizer/byte_level.h"
#include "core/tokenizer/pre_tokenizer.h"
#include "core/tokenizer/unicode.h"
#include "core/util/error.h"
#include "core/util/text_file.h"

namespace luka {

using nlohmann::json;
namespace fs = std::filesystem;

struct Tokenizer::Impl {
  fs::path source;
  TokenizerConfig config;
  std::unique_ptr<BpeModel> model;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  bool nfc = false;
  std::vector<AddedToken> added;
  AddedTokenMatcher raw_matcher;         // added tokens with normalized=false
  AddedTokenMatcher normalized_matcher;  // added tokens with normalized=true
  std::vector<std::string> id_to_text;   // vocab text or added-token content; "" for holes
  std::vector<std::string> id_to_bytes;  // what decode emits for each id
  std::vector<std::uint8_t> special;
  std::unordered_map<std::string, std::int32_t> added_ids;

  // The one encode pipeline, for valid UTF-8 `text`: added tokens in the raw text, NFC, added
  // tokens in the normalized text, pre-tokenization, BPE per word. `Out` is std::vector<std::int32_t>
  // (encode) or std::vector<TokenSpan> (encode_with_offsets: each token with the bytes of `text`
  // it covers, and it stops once `out` holds more than `max_tokens`).
  template <class Out>
  void encode_text(std::string_view text, std::size_t max_tokens, Out& out) const;
};

namespace {

// A token id from JSON, checked at its full width: an integer in [0, 2^31). (A plain get<int32_t>
// would wrap 2^32 + 5 to 5; Hugging Face's tokenizers refuses such a file.)
std::int32_t token_id_value(const nlohmann::json& v, const std::string& where, const std::string& what) {
  const bool ok = v.is_number_unsigned() ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(INT32_MAX)
                  : v.is_number_integer() ? v.get<std::int64_t>() >= 0 && v.get<std::int64_t>() <= INT32_MAX
                                          : false;
  if (!ok) fail(where, what + " has an invalid id " + v.dump() + " (expected an integer in 0.." + std::to_string(INT32_MAX) + ")");
  return static_cast<std::int32_t>(v.get<std::int64_t>());
}

std::string type_of(const json& node) {
  if (node.is_object() && node.contains("type") && node["type"].is_string()) return node["type"].get<std::string>();
  return "";
}

// True for a normalizer we apply: none or NFC (possibly in a one-element Sequence).
bool read_normalizer(const json& node, const std::string& where) {
  if (node.is_null()) return false;
  const std::string type = type_of(node);
  if (type == "NFC") return true;
  if (type == "Sequence" && node.contains("normalizers") && node["normalizers"].is_array()) {
    bool nfc = false;
    for (const json& inner : node["normalizers"]) nfc = read_normalizer(inner, where) || nfc;
    return nfc;
  }
  fail(where, "unsupported normalizer \"" + (type.empty() ? node.dump() : type) + "\" (supported: NFC or none)");
}

bool is_regex_byte_level(const json& node) {
  return type_of(node) == "ByteLevel" && node.value("use_regex", true) && !node.value("add_prefix_space", false);
}

// Accepts
//   Sequence[Split(Regex, Isolated), ByteLevel(use_regex=false)]  (Qwen2/Qwen3),
//   ByteLevel(use_regex=true)                                     (GPT-2 pattern),
//   Sequence[Digits(individual_digits=true), ByteLevel(use_regex=true)]  (SmolLM2),
// all with add_prefix_space=false.
std::unique_ptr<PreTokenizer> read_pre_tokenizer(const json& node, const fs::path& file) {
  const std::string where = file.string();
  if (is_regex_byte_level(node)) return std::make_unique<Gpt2PreTokenizer>();
  if (type_of(node) != "Sequence" || !node.contains("pretokenizers") || !node["pretokenizers"].is_array() ||
      node["pretokenizers"].size() != 2)
    fail(where, "unsupported pre_tokenizer " + node.dump().substr(0, 200) +
                    " (supported: Sequence of a Split regex and ByteLevel; ByteLevel with its regex; "
                    "Sequence of individual Digits and ByteLevel)");
  const json& first = node["pretokenizers"][0];
  const json& byte_level = node["pretokenizers"][1];
  if (type_of(first) == "Digits" && first.value("individual_digits", false) && is_regex_byte_level(byte_level))
    return std::make_unique<IndividualDigitsPreTokenizer>(std::make_unique<Gpt2PreTokenizer>());
  const json& split = first;
  if (type_of(split) != "Split" || !split.contains("pattern") || !split["pattern"].is_object() ||
      !split["pattern"].contains("Regex") || !split["pattern"]["Regex"].is_string())
    fail(where, "unsupported pre_tokenizer: expected a Split with a Regex pattern first, got " + split.dump().substr(0, 200));
  if (split.value("behavior", "") != "Isolated" || split.value("invert", false))
    fail(where, "unsupported Split behavior (supported: Isolated, invert false)");
  if (type_of(byte_level) != "ByteLevel" || byte_level.value("use_regex", true) ||
      byte_level.value("add_prefix_space", false))
    fail(where, "unsupported pre_tokenizer: expected ByteLevel with use_regex=false and add_prefix_space=false second");
  return PreTokenizer::for_pattern(split["pattern"]["Regex"].get<std::string>(), file);
}

std::vector<std::pair<std::string, std::string>> read_merges(const json& merges, const std::string& where) {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(merges.size());
  for (const json& m : merges) {
    if (m.is_string()) {  // "left right"; byte-level tokens never contain a real space
      const std::string s = m.get<std::string>();
      const std::size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        fail(where, "malformed merge \"" + s + "\" (expected \"left right\")");
      out.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      out.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      fail(where, "malformed merge " + m.dump());
    }
  }
  return out;
}

std::optional<std::string> read_token_name(const json& config, const char* key) {
  if (!config.contains(key)) return std::nullopt;
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return std::nullopt;
}

// Fills the id tables, the added-token matchers and the BPE model from a vocabulary (byte-level
// text -> id) and impl.added.
void build_tables(Tokenizer::Impl& impl, std::unordered_map<std::string, std::int32_t> vocab,
                  const std::vector<std::pair<std::string, std::string>>& merges, bool ignore_merges,
                  std::int32_t max_id, const std::string& where, std::int32_t unk_id = -1, bool fuse_unk = false) {
  // Ids index dense tables; a stray huge id must be an error, not a giant allocation.
  constexpr std::int32_t kMaxId = 1 << 24;
  if (max_id > kMaxId) fail(where, "token id " + std::to_string(max_id) + " is implausibly large");
  // A byte-level BPE spells any text with its 256 byte tokens. Without one of them (and without an
  // unknown token to stand for it) the byte would be dropped from every text that has it, silently:
  // Hugging Face's tokenizers loads such a file and does just that.
  if (unk_id < 0) {
    int missing = 0, first = -1;
    for (int b = 0; b < 256; ++b)
      if (vocab.find(byte_level::byte_to_text(static_cast<unsigned char>(b))) == vocab.end()) {
        if (first < 0) first = b;
        ++missing;
      }
    if (missing > 0) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", first);
      fail(where, "the byte-level vocabulary lacks " + std::to_string(missing) + " of the 256 byte tokens (the first: byte " + hex +
                      ") and has no unknown token, so text with those bytes would lose them silently (Hugging Face's "
                      "tokenizers accepts such a file; this tool does not)");
    }
  }
  const std::size_t size = static_cast<std::size_t>(max_id + 1);
  impl.id_to_text.assign(size, std::string());
  impl.id_to_bytes.assign(size, std::string());
  impl.special.assign(size, 0);
  for (const auto& [text, id] : vocab) {
    impl.id_to_text[id] = text;
    // Tokens outside the byte-level alphabet decode as their own text (as the Rust decoder does).
    impl.id_to_bytes[id] = byte_level::text_to_bytes(text).value_or(text);
  }
  std::vector<AddedToken> raw, normalized;
  for (const AddedToken& t : impl.added) {
    impl.id_to_text[t.id] = t.content;
    impl.id_to_bytes[t.id] = t.content;
    impl.special[t.id] = t.special;
    impl.added_ids[t.content] = t.id;
    (t.normalized && impl.nfc ? normalized : raw).push_back(t);
  }
  impl.raw_matcher = AddedTokenMatcher(raw, false);
  impl.normalized_matcher = AddedTokenMatcher(normalized, true);
  impl.model = std::make_unique<BpeModel>(std::move(vocab), merges, ignore_merges, where, unk_id, fuse_unk);
}

}  // namespace

TokenizerConfig TokenizerConfig::from_json_text(const std::string& text, const std::string& where) {
  TokenizerConfig config;
  const json j = parse_json_text(text, where, "tokenizer file");
  if (!j.is_object()) fail(where, "expected a JSON object");
  try {
    config.bos_token = read_token_name(j, "bos_token");
    config.eos_token = read_token_name(j, "eos_token");
    config.pad_token = read_token_name(j, "pad_token");
    if (j.contains("add_bos_token") && j["add_bos_token"].is_boolean()) config.add_bos_token = j["add_bos_token"].get<bool>();
    if (j.contains("chat_template")) {
      const json& t = j["chat_template"];
      if (t.is_string()) {
        config.chat_template = t.get<std::string>();
      } else if (t.is_array()) {  // named templates: [{"name": "default", "template": ...}, ...]
        for (const json& named : t)
          if (named.is_object() && named.value("name", "") == "default" && named.contains("template") && named["template"].is_string())
            config.chat_template = named["template"].get<std::string>();
      }
    }
  } catch (const json::exception& e) {
    fail(where, std::string("unexpected JSON content: ") + e.what());
  }
  return config;
}

// The tokenizer stored in a GGUF's metadata (tokenizer.ggml.*), as llama.cpp writes it.
Tokenizer Tokenizer::from_gguf(const gguf::File& file) {
  const std::string& where = file.where();
  auto impl = std::make_unique<Tokenizer::Impl>();
  impl->source = file.path();
  const std::string model = file.get_string_or("tokenizer.ggml.model").value_or("");
  if (model != "gpt2")
    fail(where, "GGUF: unsupported tokenizer model \"" + model +
                    "\" in tokenizer.ggml.model (supported: gpt2, the byte-level BPE)");
  const gguf::Value* tokens = file.get_array_or("tokenizer.ggml.tokens", gguf::ValueType::kString);
  const gguf::Value* merges_value = file.get_array_or("tokenizer.ggml.merges", gguf::ValueType::kString);
  if (!tokens) fail(where, "GGUF: missing metadata 'tokenizer.ggml.tokens'");
  if (!merges_value) fail(where, "GGUF: missing metadata 'tokenizer.ggml.merges'");
  const gguf::Value* types = file.get_array_or("tokenizer.ggml.token_type", gguf::ValueType::kI32);
  if (types && types->size() != tokens->size())
    fail(where, "GGUF: tokenizer.ggml.token_type has " + std::to_string(types->size()) + " entries for " +
                    std::to_string(tokens->size()) + " tokens");
  if (tokens->size() == 0 || tokens->size() > (std::size_t{1} << 24))
    fail(where, "GGUF: tokenizer.ggml.tokens has an implausible size " + std::to_string(tokens->size()));
  impl->pre_tokenizer = pre_tokenizer_for_gguf(file.get_string_or("tokenizer.ggml.pre").value_or("gpt-2"), where, impl->nfc);

  std::unordered_map<std::string, std::int32_t> vocab;
  vocab.reserve(tokens->size());
  for (std::size_t id = 0; id < tokens->size(); ++id) {
    const std::string& text = tokens->strings[id];
    vocab.emplace(text, static_cast<std::int32_t>(id));  // the first id wins for a repeated text
    // llama.cpp token types: 3 = control (special), 4 = user-defined; both are matched in the raw
    // text before BPE, like tokenizer.json's added tokens.
    const std::int64_t type = types ? types->ints[id] : 1;
    if (type == 3 || type == 4) {
      AddedToken t;
      t.id = static_cast<std::int32_t>(id);
      t.content = text;
      t.special = type == 3;
      t.normalized = false;
      impl->added.push_back(std::move(t));
    }
  }
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(merges_value->size());
  for (const std::string& m : merges_value->strings) {
    const std::size_t space = m.find(' ');
    if (space == std::string::npos || m.find(' ', space + 1) != std::string::npos)
      fail(where, "GGUF: malformed merge \"" + m + "\" in tokenizer.ggml.merges (expected \"left right\")");
    merges.emplace_back(m.substr(0, space), m.substr(space + 1));
  }
  // A byte with no symbol in the vocabulary becomes the unknown token (fused), as transformers'
  // GGUF tokenizer does.
  std::int32_t unk = -1;
  if (const auto u = file.get_int_or("tokenizer.ggml.unknown_token_id")) {
    if (*u < 0 || static_cast<std::size_t>(*u) >= tokens->size())
      fail(where, "GGUF: tokenizer.ggml.unknown_token_id " + std::to_string(*u) + " is outside the vocabulary");
    unk = static_cast<std::int32_t>(*u);
  }
  build_tables(*impl, std::move(vocab), merges, false, static_cast<std::int32_t>(tokens->size()) - 1, where, unk, true);

  const auto token_name = [&](const char* key) -> std::optional<std::string> {
    const auto id = file.get_int_or(key);
    if (!id) return std::nullopt;
    if (*id < 0 || static_cast<std::size_t>(*id) >= tokens->size())
      fail(where, std::string("GGUF: ") + key + " " + std::to_string(*id) + " is outside the vocabulary");
    return tokens->strings[static_cast<std::size_t>(*id)];
  };
  impl->config.bos_token = token_name("tokenizer.ggml.bos_token_id");
  impl->config.eos_token = token_name("tokenizer.ggml.eos_token_id");
  impl->config.pad_token = token_name("tokenizer.ggml.padding_token_id");
  impl->config.chat_template = file.get_string_or("tokenizer.chat_template").value_or("");
  impl->config.add_bos_token = file.get_bool_or("tokenizer.ggml.add_bos_token").value_or(false);
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::load(const fs::path& path) {
  // A mistyped model path is named as such, not as a missing tokenizer inside it.
  if (!fs::exists(path)) fail(path.string(), "no such file or folder");
  if (fs::is_regular_file(path) && gguf::File::has_magic(path)) return from_gguf(*gguf::File::open(path));
  const fs::path file = fs::is_directory(path) ? path / "tokenizer.json" : path;
  if (!fs::exists(file)) fail(file.string(), "tokenizer file not found");
  const std::string text = read_text_file(file, "tokenizer file");
  const fs::path config_file = file.parent_path() / "tokenizer_config.json";
  std::optional<std::string> config;
  if (fs::exists(config_file)) config = read_text_file(config_file, "tokenizer file");
  return from_json_text(text, config, file);
}

Tokenizer Tokenizer::from_json_text(const std::string& tokenizer_json, const std::optional<std::string>& config_json,
                                    const fs::path& source) {
  auto impl = std::make_unique<Impl>();
  impl->source = source;
  const fs::path& file = source;
  const std::string where = file.string();
  const json j = parse_json_text(tokenizer_json, where, "tokenizer file");
  try {
    if (!j.is_object()) fail(where, "expected a JSON object");
    if (!j.contains("model") || !j["model"].is_object()) fail(where, "no \"model\" object");
    const json& model = j["model"];
    const std::string type = type_of(model);
    if (type != "BPE") fail(where, "unsupported model type \"" + type + "\" (only BPE is supported)");
    if (!model.value("continuing_subword_prefix", json()).is_null() && !model["continuing_subword_prefix"].get<std::string>().empty())
      fail(where, "BPE continuing_subword_prefix is not supported");
    if (!model.value("end_of_word_suffix", json()).is_null() && !model["end_of_word_suffix"].get<std::string>().empty())
      fail(where, "BPE end_of_word_suffix is not supported");
    if (!model.contains("vocab") || !model["vocab"].is_object()) fail(where, "BPE model has no vocab object");
    if (!model.contains("merges") || !model["merges"].is_array()) fail(where, "BPE model has no merges array");

    impl->nfc = read_normalizer(j.value("normalizer", json()), where);
    impl->pre_tokenizer = read_pre_tokenizer(j.value("pre_tokenizer", json()), file);

    std::unordered_map<std::string, std::int32_t> vocab;
    vocab.reserve(model["vocab"].size());
    std::int32_t max_id = -1;
    for (const auto& [text, id] : model["vocab"].items()) {
      const std::int32_t v = token_id_value(id, where, "vocab entry \"" + text + "\"");
      vocab.emplace(text, v);
      max_id = std::max(max_id, v);
    }

    if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
      for (const json& a : j["added_tokens"]) {
        AddedToken t;
        if (!a.is_object() || !a.contains("id") || !a.contains("content") || !a["content"].is_string())
          fail(where, "malformed added token " + a.dump());
        t.id = token_id_value(a["id"], where, "added token " + a["content"].get<std::string>());
        t.content = a["content"].get<std::string>();
        t.special = a.value("special", false);
        t.single_word = a.value("single_word", false);
        t.lstrip = a.value("lstrip", false);
        t.rstrip = a.value("rstrip", false);
        t.normalized = a.value("normalized", !t.special);
        max_id = std::max(max_id, t.id);
        impl->added.push_back(std::move(t));
      }
    }
    // Added tokens are matched by their text and decoded by their id: each must be one token.
    std::unordered_map<std::int32_t, const AddedToken*> added_by_id;
    std::unordered_map<std::string, const AddedToken*> added_by_text;
    for (const AddedToken& t : impl->added) {
      if (const auto [it, fresh] = added_by_id.emplace(t.id, &t); !fresh)
        fail(where, "added tokens \"" + it->second->content + "\" and \"" + t.content + "\" share id " + std::to_string(t.id));
      if (const auto [it, fresh] = added_by_text.emplace(t.content, &t); !fresh)
        fail(where, "added token \"" + t.content + "\" appears twice, with ids " + std::to_string(it->second->id) + " and " +
                        std::to_string(t.id));
    }
    // Ids index dense tables (holes allowed, some 70 bytes an id): one stray id in a small file
    // must not become a table a thousand times the file's size (id 2^24 - 1 in 9 KB took 1.1 GB).
    if (static_cast<std::uint64_t>(max_id) > 64 * static_cast<std::uint64_t>(tokenizer_json.size()))
      fail(where, "token id " + std::to_string(max_id) + " is implausibly large for a file of " +
                      std::to_string(tokenizer_json.size()) + " bytes");

    std::int32_t unk = -1;
    if (model.contains("unk_token") && model["unk_token"].is_string()) {
      const auto it = vocab.find(model["unk_token"].get<std::string>());
      if (it == vocab.end()) fail(where, "BPE unk_token \"" + model["unk_token"].get<std::string>() + "\" is not in the vocab");
      unk = it->second;
    }
    const bool fuse_unk = model.value("fuse_unk", json(false)).is_boolean() && model.value("fuse_unk", false);
    build_tables(*impl, std::move(vocab), read_merges(model["merges"], where), model.value("ignore_merges", false),
                 max_id, where, unk, fuse_unk);
  } catch (const json::exception& e) {
    fail(where, std::string("unexpected JSON content: ") + e.what());
  }

  if (config_json)
    impl->config = TokenizerConfig::from_json_text(*config_json, (file.parent_path() / "tokenizer_config.json").string());
  return Tokenizer(std::move(impl));
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

namespace {

// Maps byte ranges of a normalized text back to the text before normalization.
class NormalizedOrigins {
 public:
  // Normalization changed nothing: a range only widens to whole characters.
  explicit NormalizedOrigins(std::string_view original) : original_(original) {}
  NormalizedOrigins(std::string_view original, std::vector<unicode::ByteRange> origins)
      : original_(original), origins_(std::move(origins)), identity_(false) {}

  // The original range of normalized bytes [begin, end), end > begin: from the start of the first
  // byte's source character to the end of the last byte's.
  std::pair<std::size_t, std::size_t> map(std::size_t begin, std::size_t end) const {
    if (!identity_) return {origins_[begin].begin, origins_[end - 1].end};
    const auto continuation = [&](std::size_t i) { return (static_cast<unsigned char>(original_[i]) & 0xC0) == 0x80; };
    while (begin > 0 && continuation(begin)) --begin;
    while (end < original_.size() && continuation(end)) ++end;
    return {begin, end};
  }

 private:
  std::string_view original_;
  std::vector<unicode::ByteRange> origins_;
  bool identity_ = true;
};

}  // namespace

template <class Out>
void Tokenizer::Impl::encode_text(std::string_view text, std::size_t max_tokens, Out& out) const {
  constexpr bool kOffsets = std::is_same_v<Out, std::vector<TokenSpan>>;
  static_assert(kOffsets || std::is_same_v<Out, std::vector<std::int32_t>>);
  std::vector<TextPiece> raw, pieces;
  std::vector<std::string_view> words;
  std::vector<BpeModel::Piece> tokens;
  raw_matcher.split(text, raw);
  for (const TextPiece& r : raw) {
    if (out.size() > max_tokens) return;
    const auto raw_at = static_cast<std::size_t>(r.text.data() - text.data());
    if (r.added_id >= 0) {
      if constexpr (kOffsets) {
        out.push_back({r.added_id, raw_at, raw_at + r.text.size()});
      } else {
        out.push_back(r.added_id);
      }
      continue;
    }
    // Normalization (NFC) of a piece between added tokens; with offsets, a map of its bytes back.
    std::string normalized;
    std::string_view view = r.text;
    NormalizedOrigins origins(r.text);
    if (nfc) {
      normalized = unicode::nfc(r.text);
      if (normalized != r.text) {
        view = normalized;
        if constexpr (kOffsets) {
          std::vector<unicode::ByteRange> ranges;
          // The replay of the Rust normalizer must give the very text that is tokenized; should a
          // character ever make them differ, every token of this piece covers the whole piece.
          if (unicode::nfc_aligned(r.text, ranges) != normalized) ranges.assign(normalized.size(), {0, r.text.size()});
          origins = NormalizedOrigins(r.text, std::move(ranges));
        }
      }
    }
    const auto emit = [&](std::int32_t id, std::size_t begin, std::size_t end) {
      if constexpr (kOffsets) {
        const auto [b, e] = origins.map(begin, end);
        out.push_back({id, raw_at + b, raw_at + e});
      } else {
        out.push_back(id);
      }
    };
    pieces.clear();
    if (normalized_matcher.empty()) {
      pieces.push_back({view, -1});
    } else {
      normalized_matcher.split(view, pieces);
    }
    for (const TextPiece& piece : pieces) {
      if (out.size() > max_tokens) return;
      const auto piece_at = static_cast<std::size_t>(piece.text.data() - view.data());
      if (piece.added_id >= 0) {
        emit(piece.added_id, piece_at, piece_at + piece.text.size());
        continue;
      }
      words.clear();
      pre_tokenizer->split(piece.text, words);
      for (std::string_view word : words) {
        if constexpr (kOffsets) {
          if (out.size() > max_tokens) return;  // the words before gave the tokens of a prefix of the whole encoding
          const auto word_at = static_cast<std::size_t>(word.data() - view.data());
          tokens.clear();
          model->encode_word(word, tokens);
          for (const BpeModel::Piece& t : tokens) emit(t.id, word_at + t.begin, word_at + t.end);
        } else {
          model->encode_word(word, out);
        }
      }
    }
  }
}

std::vector<TokenSpan> Tokenizer::encode_with_offsets(std::string_view text, std::size_t max_tokens) const {
  std::string repaired;
  std::vector<std::size_t> source_positions;  // repaired byte -> input byte, when repaired
  if (!unicode::is_valid_utf8(text)) {
    repaired = unicode::utf8_lossy(text, source_positions);
    text = repaired;
  }
  std::vector<TokenSpan> spans;
  impl_->encode_text(text, max_tokens, spans);
  // A word's tokens come together: keep exactly max_tokens + 1.
  if (spans.size() > max_tokens && spans.size() - max_tokens > 1) spans.resize(max_tokens + 1);
  if (!source_positions.empty()) {
    for (TokenSpan& s : spans) {
      s.begin = source_positions[s.begin];
      s.end = source_positions[s.end];
    }
  }
  return spans;
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text) const {
  // Rust strings are always valid UTF-8; repair invalid input the same way decode would.
  std::string repaired;
  if (!unicode::is_valid_utf8(text)) {
    repaired = unicode::utf8_lossy(text);
    text = repaired;
  }
  std::vector<std::int32_t> ids;
  impl_->encode_text(text, SIZE_MAX, ids);
  return ids;
}

std::optional<std::int32_t> Tokenizer::sequence_bos() const {
  if (!impl_->config.add_bos_token || !impl_->config.bos_token) return std::nullopt;
  return token_id(*impl_->config.bos_token);
}

std::vector<std::int32_t> Tokenizer::with_sequence_bos(std::vector<std::int32_t> ids) const {
  if (const auto bos = sequence_bos(); bos && !ids.empty() && ids.front() != *bos) ids.insert(ids.begin(), *bos);
  return ids;
}

std::string Tokenizer::decode(const std::vector<std::int32_t>& ids) const {
  std::string bytes;
  for (std::int32_t id : ids) bytes += token_bytes(id);
  return unicode::utf8_lossy(bytes);
}

std::string Tokenizer::token_bytes(std::int32_t id) const {
  if (id < 0 || id >= vocab_size()) fail("tokenizer", "token id " + std::to_string(id) + " is out of range");
  return impl_->id_to_bytes[id];
}

const std::vector<std::string>& Tokenizer::all_token_bytes() const { return impl_->id_to_bytes; }

const std::string& Tokenizer::token_text(std::int32_t id) const {
  if (id < 0 || id >= vocab_size()) fail("tokenizer", "token id " + std::to_string(id) + " is out of range");
  return impl_->id_to_text[id];
}

std::optional<std::int32_t> Tokenizer::token_id(std::string_view token) const {
  const std::string key(token);
  if (const auto it = impl_->added_ids.find(key); it != impl_->added_ids.end()) return it->second;
  const auto& vocab = impl_->model->vocab();
  if (const auto it = vocab.find(key); it != vocab.end()) return it->second;
  return std::nullopt;
}

bool Tokenizer::is_special(std::int32_t id) const {
  return id >= 0 && id < vocab_size() && impl_->special[id] != 0;
}

std::int32_t Tokenizer::vocab_size() const { return static_cast<std::int32_t>(impl_->id_to_text.size()); }

const TokenizerConfig& Tokenizer::config() const { return impl_->config; }

const fs::path& Tokenizer::source() const { return impl_->source; }

std::string StreamDecoder::push(std::int32_t id) {
  pending_ += tokenizer_->token_bytes(id);
  const std::size_t hold = unicode::incomplete_utf8_tail(pending_);
  std::string ready = unicode::utf8_lossy(std::string_view(pending_).substr(0, pending_.size() - hold));
  pending_.erase(0, pending_.size() - hold);
  return ready;
}

std::string StreamDecoder::finish() {
  std::string rest = unicode::utf8_lossy(pending_);
  pending_.clear();
  return rest;
}

}  // namespace luka
