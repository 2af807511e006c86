// The WikiSalad question-answering evaluation of the LuKA paper's Table 1: every question of an
// example asked on its own, after the example's whole prompt (segments with their embedded
// "Question i:" lines, as the dataset gives it), through the chat template with a fixed system
// prompt; greedy decoding of at most 100 tokens; scored by lenient exact match (answer_match.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace luka {
class RunSession;
class Tokenizer;
}  // namespace luka

namespace luka::eval {

struct QaRecord;

// The system message and the user message's layout of the authors' evaluation.
extern const char* const kQaSystemPrompt;
std::string qa_user_message(const std::string& context, const std::string& question);

struct QaQuestion {
  std::string file;        // the file's stem, e.g. "hard_3topic_short"
  std::string difficulty;  // "easy", "medium", "hard", "very_hard" (the stem before "_<N>topic"), else the stem
  int example = 0;         // index in the file
  std::string example_id;
  int question = 0;        // index in the example
  std::string text;
  std::vector<std::string> answers;  // empty: unanswerable
  std::string context;               // the example's prompt
};

// The questions of examples [first, first + count) of a WikiSalad file (count < 0: to the end).
// Throws luka::Error naming the file and the example for a malformed file or an out-of-range first.
std::vector<QaQuestion> load_qa_questions(const std::filesystem::path& file, int first, int count);

// A question as the model reads it: the system message and the user message through the chat
// template, and with query_agnostic the number of leading ids that hold the context alone
// ("{context}\n\n", prefilled before the question; context_token_count in niah.h).
struct QaPrompt {
  std::vector<std::int32_t> ids;
  std::int64_t context_tokens = 0;
};
QaPrompt qa_prompt(const Tokenizer& tokenizer, const QaQuestion& q, bool query_agnostic);

// One question asked through `session`'s loop under its config: greedy, at most max_new_tokens,
// stopping at `stop_ids`; the prediction is the answer without special tokens, stripped, scored
// by lenient exact match. The record names `preset` and the time the question took.
QaRecord answer_question(RunSession& session, const Tokenizer& tokenizer, const std::string& preset, const QaQuestion& q,
                         const QaPrompt& prompt, std::int64_t max_new_tokens, const std::vector<std::int32_t>& stop_ids);

// "easy_2topic_short" -> "easy", "very_hard_3topic_long" -> "very_hard"; other names unchanged.
std::string difficulty_of(const std::string& stem);
// The rank of a difficulty in Table 1's order (easy, medium, hard, very_hard, then the rest).
int difficulty_rank(const std::string& difficulty);

}  // namespace luka::eval
