// Needle in a haystack, and what the long-context tasks share (core/eval/ruler.h builds RULER's
// synthetic tasks on it): a haystack text split into sentences, needles inserted at a sentence
// boundary at the asked depth, prompts built to an exact number of tokens with the model's own
// tokenizer, seeded randomness that gives the same sample for the same seed, cell and index, and
// RULER's two scores. No LibTorch here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace luka {
class Tokenizer;
}

namespace luka::eval {

// [SECTION] Scoring, as RULER scores its tasks (both case-insensitive, on the raw prediction).
// string_match_all: the fraction of the references found in the prediction (partial recall of a
// multi-value answer: 2 of 4 values found scores 0.5).
double string_match_all(std::string_view prediction, const std::vector<std::string>& references);
// string_match_part: 1 when any reference is found in the prediction, else 0.
double string_match_part(std::string_view prediction, const std::vector<std::string>& references);

enum class ScoreMetric { kAll, kPart };
const char* to_string(ScoreMetric m);  // "string_match_all", "string_match_part"
double score(ScoreMetric m, std::string_view prediction, const std::vector<std::string>& references);

// [SECTION] Seeded randomness. The generator of one sample depends on the seed, the task, the
// length, the depth (or other cell coordinate) and the sample's index only, so adding lengths or
// depths to a run changes none of the samples already there. std::mt19937_64's sequence is fixed
// by the standard; the distributions below are ours (the standard's are not portable).
class Rng {
 public:
  Rng(std::uint64_t seed, std::string_view task, std::int64_t length, std::int64_t cell, std::int64_t index);
  std::uint64_t next() { return engine_(); }
  std::uint64_t below(std::uint64_t n);  // uniform in [0, n), n > 0
  double uniform();                      // [0, 1)
  template <typename T>
  void shuffle(std::vector<T>& v) {
    for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[static_cast<std::size_t>(below(i))]);
  }

 private:
  std::mt19937_64 engine_;
};

// [SECTION] Haystacks.
// Byte positions where a sentence may start in `text`: 0, each position right after a sentence's
// end ('.', '!' or '?', then any closing quotes, brackets or underscores, then whitespace; a period
// after "Mr", "Mrs", "Dr", "St" or a single capital letter ends no sentence), and text.size().
std::vector<std::size_t> sentence_boundaries(std::string_view text);

// A long text for the needles to hide in: a file, or every .txt file of a folder in name order
// joined by blank lines. Line wraps become spaces; paragraphs (blank lines) stay.
class Haystack {
 public:
  // Throws luka::Error naming the path when it is missing, unreadable or holds no sentences.
  static Haystack load(const std::filesystem::path& path);
  static Haystack from_text(std::string text);  // text as given (no unwrapping)

  const std::string& text() const { return text_; }
  const std::vector<std::size_t>& boundaries() const { return boundaries_; }
  // `chars` bytes of the text from a sentence start chosen by `rng`, wrapping around to the
  // beginning as often as needed.
  std::string window(Rng& rng, std::size_t chars) const;

 private:
  std::string text_;
  std::vector<std::size_t> boundaries_;
};

// [SECTION] Prompts.
// How a task's text becomes the model's input. Chat: the user message through the chat template
// (ChatML; a system message when `system` is set), the answer prefix after the generation prompt.
// Raw: the text, then the answer prefix. A BOS token goes in front where the tokenizer asks for one.
struct PromptFormat {
  bool chat = true;
  std::optional<std::string> system;
  bool hybrid_thinking = false;  // a Qwen3 hybrid template: the empty think block after the generation prompt
};
std::string format_prompt(const PromptFormat& format, const std::string& user, const std::string& answer_prefix);
// format_prompt's text as the model's ids (BOS included where the tokenizer adds one).
std::vector<std::int32_t> prompt_ids(const Tokenizer& tokenizer, const std::string& text);

// How many of a prompt's leading `ids` (prompt_ids of `text`) hold the context alone, the text
// before byte `question_at`: the longest common prefix of `ids` and the ids of that text, so the
// split falls where both encodings agree (a token that joins the context's last characters with
// the question's first goes with the question). For query-agnostic evaluation.
std::int64_t context_token_count(const Tokenizer& tokenizer, const std::string& text, std::size_t question_at,
                                 const std::vector<std::int32_t>& ids);

// The k of a prompt text `build(k)` whose ids (prompt_ids) are exactly `target` tokens, for k in
// [0, max_k]; build's token count must grow with k (a step may add more than one token, or, where
// text merges across a join, one fewer). nullopt when no k gives exactly `target`.
struct ExactFit {
  std::int64_t k = 0;
  std::string text;
  std::vector<std::int32_t> ids;
};
std::optional<ExactFit> fit_exact(const Tokenizer& tokenizer, std::int64_t target, std::int64_t max_k,
                                  const std::function<std::string(std::int64_t)>& build);
// The largest k in [0, max_k] whose build(k) has at most `target` tokens; -1 when even k = 0 has more.
std::int64_t largest_within(const Tokenizer& tokenizer, std::int64_t target, std::int64_t max_k,
                            const std::function<std::string(std::int64_t)>& build);

// A text of the first `k` tokens of `window` (encoded once, `spans` being its tokens' byte ranges)
// with `inserts` placed at sentence boundaries: each at the boundary nearest to its depth (a
// fraction of the k tokens, 0 = start, 1 = end), in the order given (depths ascending). An insert
// at the start is followed by a space; elsewhere it follows the boundary after a space. `where`
// gets each insert's byte range in the result.
struct TokenSpanBytes {
  std::size_t begin = 0, end = 0;
};
std::string cut_and_insert(const std::string& window, const std::vector<TokenSpanBytes>& spans, std::int64_t k,
                           const std::vector<std::pair<double, std::string>>& inserts,
                           std::vector<TokenSpanBytes>* where = nullptr);

// `cut` with a space after it when it ends in a punctuation mark. Some tokenizers (Qwen's) join a
// final punctuation mark and the newline after it into one token, so that one haystack token more
// adds no token to the prompt and the next one two, and an exact length can fall in between: with
// the space each haystack token adds one. A fit that fails with the plain cut is tried with this.
std::string keep_apart(std::string cut);

// [SECTION] Samples.
// One question of a long-context task at one length (and, for the needle grid, one depth).
struct LongContextSample {
  std::string task;
  std::int64_t length = 0;  // the target; ids.size() == length
  double depth = -1;        // the needle grid's depth in [0, 1]; -1 for tasks without one
  int index = 0;            // the sample's index in its cell
  std::string text;         // the model's input (formatted)
  std::vector<std::int32_t> ids;
  std::string query;  // what the question asks about (a key, a value, ...)
  std::vector<std::string> answers;
  ScoreMetric metric = ScoreMetric::kAll;
  std::vector<TokenSpanBytes> needles;  // byte ranges in `text` of the inserted needles
  std::int64_t filler = 0;              // haystack tokens (or other filler units) fitted
  // Where the question (what follows the context: the question and the answer prefix) starts in
  // `text`; a query-agnostic run prefills the text before it first (context_token_count).
  std::size_t question_at = std::string::npos;
};

// The needle sentence of the usual formulation.
std::string niah_needle(const std::string& key,
                        const std::string& value);  // "The special magic number for KEY is VALUE."

// A random key (an adjective-noun pair such as "quiet-harbor"), a 7-digit number and a UUID.
std::string random_word_key(Rng& rng);
std::string random_number(Rng& rng, int digits = 7);
std::string random_uuid(Rng& rng);

// The needle grid's cell: `values` needles of one random key (all at the same sentence boundary,
// nearest to `depth`) in a haystack window of `haystack`, built to exactly `length` tokens. The
// question asks for the key's number (numbers, for several values); each value is an answer,
// scored by string_match_all. Throws luka::Error when `length` is too short for the question or
// cannot be hit exactly.
LongContextSample make_niah_sample(const Haystack& haystack, const Tokenizer& tokenizer, const PromptFormat& format,
                                   std::int64_t length, double depth, int values, int index, std::uint64_t seed);

}  // namespace luka::eval
