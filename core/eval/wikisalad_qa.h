// The WikiSalad question-answering evaluation of the LuKA paper's Table 1: every question of an
// example asked on its own, after the example's whole prompt (segments with their embedded
// "Question i:" lines, as the dataset gives it), through the chat template with a fixed system
// prompt; greedy decoding of at most 100 tokens; scored by lenient exact match (answer_match.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace luka::eval {

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

// "easy_2topic_short" -> "easy", "very_hard_3topic_long" -> "very_hard"; other names unchanged.
std::string difficulty_of(const std::string& stem);
// The rank of a difficulty in Table 1's order (easy, medium, hard, very_hard, then the rest).
int difficulty_rank(const std::string& difficulty);

}  // namespace luka::eval
