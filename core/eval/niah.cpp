#include "core/eval/niah.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "core/chat/chat_format.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/error.h"
#include "core/util/text_file.h"

namespace luka::eval {

// [SECTION] Scoring

namespace {

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

}  // namespace

double string_match_all(std::string_view prediction, const std::vector<std::string>& references) {
  if (references.empty()) return 0;
  const std::string p = ascii_lower(prediction);
  int found = 0;
  for (const std::string& r : references) found += p.find(ascii_lower(r)) != std::string::npos ? 1 : 0;
  return static_cast<double>(found) / static_cast<double>(references.size());
}

double string_match_part(std::string_view prediction, const std::vector<std::string>& references) {
  const std::string p = ascii_lower(prediction);
  for (const std::string& r : references)
    if (p.find(ascii_lower(r)) != std::string::npos) return 1;
  return 0;
}

const char* to_string(ScoreMetric m) { return m == ScoreMetric::kAll ? "string_match_all" : "string_match_part"; }

double score(ScoreMetric m, std::string_view prediction, const std::vector<std::string>& references) {
  return m == ScoreMetric::kAll ? string_match_all(prediction, references) : string_match_part(prediction, references);
}

// [SECTION] Seeded randomness

namespace {

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

Rng::Rng(std::uint64_t seed, std::string_view task, std::int64_t length, std::int64_t cell, std::int64_t index) {
  std::uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a of the task's name
  for (const char c : task) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  std::uint64_t s = splitmix(seed);
  for (const std::uint64_t part :
       {h, static_cast<std::uint64_t>(length), static_cast<std::uint64_t>(cell), static_cast<std::uint64_t>(index)})
    s = splitmix(s ^ part);
  engine_.seed(s);
}

std::uint64_t Rng::below(std::uint64_t n) {
  const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % n);  // no modulo bias
  for (;;) {
    const std::uint64_t x = engine_();
    if (x < limit) return x % n;
  }
}

double Rng::uniform() { return static_cast<double>(engine_() >> 11) * (1.0 / 9007199254740992.0); }

// [SECTION] Haystacks

namespace {

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }
bool is_upper(char c) { return c >= 'A' && c <= 'Z'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || is_upper(c); }

// A period that ends an abbreviation or an initial, not a sentence.
bool abbreviation_before(std::string_view text, std::size_t dot) {
  std::size_t a = dot;
  while (a > 0 && is_alpha(text[a - 1])) --a;
  const std::string_view word = text.substr(a, dot - a);
  if (word.size() == 1 && is_upper(word[0])) return true;
  for (const char* abbr : {"Mr", "Mrs", "Dr", "St", "Ms"})
    if (word == abbr) return true;
  return false;
}

}  // namespace

std::vector<std::size_t> sentence_boundaries(std::string_view text) {
  std::vector<std::size_t> out = {0};
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c != '.' && c != '!' && c != '?') continue;
    if (c == '.' && abbreviation_before(text, i)) continue;
    std::size_t j = i + 1;
    for (;;) {  // closing quotes and brackets: " ' ) ] _ and the UTF-8 right quotes ’ ”
      if (j < text.size() &&
          (text[j] == '"' || text[j] == '\'' || text[j] == ')' || text[j] == ']' || text[j] == '_')) {
        ++j;
      } else if (j + 2 < text.size() && static_cast<unsigned char>(text[j]) == 0xE2 &&
                 static_cast<unsigned char>(text[j + 1]) == 0x80 &&
                 (static_cast<unsigned char>(text[j + 2]) == 0x99 || static_cast<unsigned char>(text[j + 2]) == 0x9D)) {
        j += 3;
      } else {
        break;
      }
    }
    if (j == text.size()) break;  // text.size() is added below
    if (is_space(text[j]) && j > out.back()) out.push_back(j);
    i = j - 1;
  }
  if (out.back() != text.size()) out.push_back(text.size());
  return out;
}

namespace {

// Line wraps become spaces, runs of blank lines one blank line; \r dropped.
std::string unwrap(const std::string& raw) {
  std::string text;
  text.reserve(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const char c = raw[i];
    if (c == '\r') continue;
    if (c != '\n') {
      text += c;
      continue;
    }
    std::size_t j = i;
    int newlines = 0;
    while (j < raw.size() && (raw[j] == '\n' || raw[j] == '\r')) newlines += raw[j++] == '\n' ? 1 : 0;
    while (!text.empty() && text.back() == ' ') text.pop_back();
    text += newlines >= 2 ? "\n\n" : " ";
    i = j - 1;
  }
  return text;
}

}  // namespace

Haystack Haystack::from_text(std::string text) {
  Haystack h;
  h.text_ = std::move(text);
  h.boundaries_ = sentence_boundaries(h.text_);
  return h;
}

Haystack Haystack::load(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> files;
  if (fs::is_directory(path, ec)) {
    for (const auto& e : fs::directory_iterator(path, ec))
      if (e.path().extension() == ".txt") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    if (files.empty()) fail(path.string(), "no .txt files in the folder for a haystack");
  } else if (fs::exists(path, ec)) {
    files.push_back(path);
  } else {
    fail(path.string(), "no such haystack file or folder");
  }
  std::string text;
  for (const fs::path& f : files) {
    const std::string part = unwrap(read_text_file(f, "haystack text"));
    if (!text.empty()) text += "\n\n";
    text += part;
  }
  Haystack h = from_text(std::move(text));
  if (h.boundaries_.size() < 3)
    fail(path.string(), "the haystack has no sentences (no '.', '!' or '?' followed by a space)");
  return h;
}

std::string Haystack::window(Rng& rng, std::size_t chars) const {
  if (text_.empty()) fail("haystack", "the haystack is empty");
  // Start at a sentence start (not the text's end).
  const std::size_t starts = boundaries_.size() > 1 ? boundaries_.size() - 1 : 1;
  std::size_t at = boundaries_[static_cast<std::size_t>(rng.below(starts))];
  while (at < text_.size() && is_space(text_[at])) ++at;
  std::string out;
  out.reserve(chars);
  while (out.size() < chars) {
    if (at >= text_.size()) {
      out += "\n\n";
      at = 0;
    }
    const std::size_t take = std::min(text_.size() - at, chars - out.size());
    out.append(text_, at, take);
    at += take;
  }
  return out;
}

// [SECTION] Prompts

std::string format_prompt(const PromptFormat& format, const std::string& user, const std::string& answer_prefix) {
  if (!format.chat) return user + answer_prefix;
  std::vector<ChatMessage> messages;
  if (format.system) messages.push_back({"system", *format.system});
  messages.push_back({"user", user});
  ChatOptions options;
  std::string prefix = answer_prefix;
  while (!prefix.empty() && prefix.front() == ' ') prefix.erase(0, 1);  // the assistant turn starts a line
  return format_chatml(messages, options, format.hybrid_thinking) + prefix;
}

std::vector<std::int32_t> prompt_ids(const Tokenizer& tokenizer, const std::string& text) {
  return tokenizer.with_sequence_bos(tokenizer.encode(text));
}

std::int64_t context_token_count(const Tokenizer& tokenizer, const std::string& text, std::size_t question_at,
                                 const std::vector<std::int32_t>& ids) {
  if (question_at == std::string::npos || question_at > text.size())
    fail("query-agnostic prompt", "the question's place in the prompt is unknown");
  const std::vector<std::int32_t> head = prompt_ids(tokenizer, text.substr(0, question_at));
  std::size_t n = 0;
  while (n < head.size() && n < ids.size() && head[n] == ids[n]) ++n;
  return static_cast<std::int64_t>(n);
}

namespace {

// Token counts of build(k), each k encoded once.
class Counter {
 public:
  Counter(const Tokenizer& tokenizer, const std::function<std::string(std::int64_t)>& build)
      : tokenizer_(tokenizer), build_(build) {}
  std::int64_t operator()(std::int64_t k) {
    const auto it = counts_.find(k);
    if (it != counts_.end()) return it->second;
    const std::int64_t c = static_cast<std::int64_t>(prompt_ids(tokenizer_, build_(k)).size());
    counts_[k] = c;
    return c;
  }

 private:
  const Tokenizer& tokenizer_;
  const std::function<std::string(std::int64_t)>& build_;
  std::map<std::int64_t, std::int64_t> counts_;
};

// The largest k in [0, max_k] with count(k) <= target, for counts that grow with k; -1 when
// count(0) > target. Brackets it around the guess that each k adds a token, then bisects.
std::int64_t largest_at_most(Counter& count, std::int64_t target, std::int64_t max_k) {
  max_k = std::max<std::int64_t>(max_k, 0);
  const std::int64_t c0 = count(0);
  if (c0 > target) return -1;
  std::int64_t lo = 0, hi = -1;  // count(lo) <= target < count(hi); hi = -1: none known
  const std::int64_t guess = std::clamp<std::int64_t>(target - c0, 0, max_k);
  if (count(guess) <= target) {
    lo = guess;
    for (std::int64_t step = 16; lo < max_k; step *= 2) {
      const std::int64_t k = std::min(max_k, lo + step);
      if (count(k) > target) {
        hi = k;
        break;
      }
      lo = k;
    }
  } else {
    hi = guess;
    for (std::int64_t step = 16;; step *= 2) {
      const std::int64_t k = std::max<std::int64_t>(0, hi - step);
      if (count(k) <= target) {
        lo = k;
        break;
      }
      hi = k;
    }
  }
  if (hi >= 0)
    while (hi - lo > 1) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      (count(mid) <= target ? lo : hi) = mid;
    }
  return lo;
}

}  // namespace

std::int64_t largest_within(const Tokenizer& tokenizer, std::int64_t target, std::int64_t max_k,
                            const std::function<std::string(std::int64_t)>& build) {
  Counter count(tokenizer, build);
  return largest_at_most(count, target, max_k);
}

std::optional<ExactFit> fit_exact(const Tokenizer& tokenizer, std::int64_t target, std::int64_t max_k,
                                  const std::function<std::string(std::int64_t)>& build) {
  Counter count(tokenizer, build);
  const auto result = [&](std::int64_t k) {
    ExactFit f;
    f.k = k;
    f.text = build(k);
    f.ids = prompt_ids(tokenizer, f.text);
    return f;
  };
  max_k = std::max<std::int64_t>(max_k, 0);
  const std::int64_t lo = largest_at_most(count, target, max_k);
  if (lo < 0) return std::nullopt;
  if (count(lo) == target) return result(lo);
  // A join that merges tokens can make the count skip a value: look close by.
  for (std::int64_t d = 1; d <= 8; ++d)
    for (const std::int64_t k : {lo - d, lo + d})
      if (k >= 0 && k <= max_k && count(k) == target) return result(k);
  return std::nullopt;
}

std::string cut_and_insert(const std::string& window, const std::vector<TokenSpanBytes>& spans, std::int64_t k,
                           const std::vector<std::pair<double, std::string>>& inserts,
                           std::vector<TokenSpanBytes>* where) {
  k = std::clamp<std::int64_t>(k, 0, static_cast<std::int64_t>(spans.size()));
  const std::size_t end = k > 0 ? spans[static_cast<std::size_t>(k - 1)].end : 0;
  const std::string prefix = window.substr(0, end);
  const std::vector<std::size_t> bounds = sentence_boundaries(prefix);
  std::vector<std::size_t> at;
  for (const auto& [depth, text] : inserts) {
    const std::int64_t t = std::clamp<std::int64_t>(std::llround(depth * static_cast<double>(k)), 0, k);
    const std::size_t c = t > 0 ? spans[static_cast<std::size_t>(t - 1)].end : 0;
    // The nearest boundary (the earlier one on a tie).
    const auto it = std::lower_bound(bounds.begin(), bounds.end(), c);
    std::size_t b = it == bounds.end() ? bounds.back() : *it;
    if (it != bounds.begin() && (it == bounds.end() || c - *(it - 1) <= *it - c)) b = *(it - 1);
    if (!at.empty()) b = std::max(b, at.back());  // keep the inserts' order
    at.push_back(b);
  }
  std::string out;
  std::size_t from = 0;
  if (where) where->clear();
  for (std::size_t i = 0; i < inserts.size(); ++i) {
    out.append(prefix, from, at[i] - from);
    from = at[i];
    if (at[i] == 0) {
      if (where) where->push_back({out.size(), out.size() + inserts[i].second.size()});
      out += inserts[i].second + " ";
    } else {
      out += " ";
      if (where) where->push_back({out.size(), out.size() + inserts[i].second.size()});
      out += inserts[i].second;
    }
  }
  out.append(prefix, from, std::string::npos);
  return out;
}

std::string keep_apart(std::string cut) {
  if (!cut.empty() && std::ispunct(static_cast<unsigned char>(cut.back()))) cut += ' ';
  return cut;
}

// [SECTION] Samples

std::string niah_needle(const std::string& key, const std::string& value) {
  return "The special magic number for " + key + " is " + value + ".";
}

namespace {

// Keys are adjective-noun pairs, as RULER's word keys are: 64 x 64 of them.
const char* const kAdjectives[] = {
    "amber",  "ancient", "bitter", "bold",    "brave",  "brief",  "bright", "broad",  "calm",   "clever",  "cold",
    "crisp",  "curious", "damp",   "distant", "dusty",  "eager",  "early",  "faint",  "fierce", "gentle",  "gilded",
    "glad",   "golden",  "grand",  "hidden",  "hollow", "humble", "icy",    "idle",   "jolly",  "keen",    "lively",
    "lonely", "loud",    "lucky",  "mellow",  "misty",  "narrow", "noble",  "odd",    "pale",   "patient", "plain",
    "polite", "proud",   "quick",  "quiet",   "rapid",  "rare",   "rough",  "rustic", "silent", "silver",  "sleepy",
    "smooth", "steady",  "stormy", "sturdy",  "swift",  "tender", "vivid",  "warm",   "wild"};
const char* const kNouns[] = {"anchor",  "apple",   "arrow",  "badger",  "basket",   "beacon",  "bridge",  "candle",
                              "canyon",  "castle",  "cedar",  "chimney", "cloud",    "comet",   "compass", "cottage",
                              "crane",   "crystal", "falcon", "feather", "fountain", "garden",  "glacier", "harbor",
                              "harvest", "helmet",  "island", "jacket",  "kettle",   "lantern", "lemon",   "meadow",
                              "mirror",  "monitor", "needle", "orchard", "otter",    "paddle",  "parrot",  "pebble",
                              "pepper",  "pillow",  "planet", "quarry",  "rabbit",   "ribbon",  "river",   "saddle",
                              "salmon",  "shadow",  "spider", "spruce",  "summit",   "temple",  "thistle", "thunder",
                              "tiger",   "tunnel",  "valley", "violin",  "walnut",   "window",  "wizard",  "yarrow"};

}  // namespace

std::string random_word_key(Rng& rng) {
  const std::string adjective = kAdjectives[rng.below(std::size(kAdjectives))];
  return adjective + "-" + kNouns[rng.below(std::size(kNouns))];
}

std::string random_number(Rng& rng, int digits) {
  std::uint64_t lo = 1;
  for (int i = 1; i < digits; ++i) lo *= 10;
  return std::to_string(lo + rng.below(9 * lo));
}

std::string random_uuid(Rng& rng) {
  static const char* const kHex = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 32; ++i) {
    if (i == 8 || i == 12 || i == 16 || i == 20) out += '-';
    std::uint64_t nibble = rng.below(16);
    if (i == 12) nibble = 4;                 // version 4
    if (i == 16) nibble = 8 + (nibble & 3);  // variant 10xx
    out += kHex[nibble];
  }
  return out;
}

LongContextSample make_niah_sample(const Haystack& haystack, const Tokenizer& tokenizer, const PromptFormat& format,
                                   std::int64_t length, double depth, int values, int index, std::uint64_t seed) {
  if (depth < 0 || depth > 1) fail("niah", "depth " + std::to_string(depth) + " is outside [0, 1]");
  if (values < 1) fail("niah", "a cell needs at least one value");
  Rng rng(seed, "niah/" + std::to_string(values), length, std::llround(depth * 1e6), index);
  LongContextSample s;
  s.task = "niah";
  s.length = length;
  s.depth = depth;
  s.index = index;
  s.metric = ScoreMetric::kAll;
  s.query = random_word_key(rng);
  std::set<std::string> seen;
  while (static_cast<int>(s.answers.size()) < values) {
    std::string v = random_number(rng);
    if (seen.insert(v).second) s.answers.push_back(v);
  }
  std::string block;
  for (const std::string& v : s.answers) block += (block.empty() ? "" : " ") + niah_needle(s.query, v);
  const bool many = values > 1;
  const std::string user_head =
      "Some special magic numbers are hidden within the following text. Make sure to memorize it. I will quiz you "
      "about the numbers "
      "afterwards.\n";
  const std::string question =
      many ? "\nWhat are all the special magic numbers for " + s.query + " mentioned in the provided text?"
           : "\nWhat is the special magic number for " + s.query + " mentioned in the provided text?";
  const std::string answer_prefix =
      many ? " The special magic numbers for " + s.query + " mentioned in the provided text are"
           : " The special magic number for " + s.query + " mentioned in the provided text is";

  const std::string window = haystack.window(rng, static_cast<std::size_t>(length) * 8 + 4096);
  std::vector<TokenSpanBytes> spans;
  for (const TokenSpan& t : tokenizer.encode_with_offsets(window, static_cast<std::size_t>(length) + 8))
    spans.push_back({t.begin, t.end});
  bool apart = false;
  const auto build = [&](std::int64_t k) {
    const std::string cut = cut_and_insert(window, spans, k, {{depth, block}});
    return format_prompt(format, user_head + (apart ? keep_apart(cut) : cut) + question, answer_prefix);
  };
  std::optional<ExactFit> fit = fit_exact(tokenizer, length, static_cast<std::int64_t>(spans.size()), build);
  if (!fit) {
    apart = true;
    fit = fit_exact(tokenizer, length, static_cast<std::int64_t>(spans.size()), build);
  }
  if (!fit) {
    const std::int64_t bare = static_cast<std::int64_t>(prompt_ids(tokenizer, build(0)).size());
    if (bare > length)
      fail("niah", "a length of " + std::to_string(length) + " tokens is shorter than the question and needle alone (" +
                       std::to_string(bare) + " tokens)");
    fail("niah", "no haystack cut gives exactly " + std::to_string(length) + " tokens");
  }
  s.text = fit->text;
  s.ids = fit->ids;
  s.filler = fit->k;
  s.question_at = s.text.rfind(question);
  const std::size_t at = s.text.find(block);
  if (at != std::string::npos) {
    std::size_t from = at;
    for (const std::string& v : s.answers) {
      const std::string n = niah_needle(s.query, v);
      s.needles.push_back({from, from + n.size()});
      from += n.size() + 1;
    }
  }
  return s;
}

}  // namespace luka::eval
