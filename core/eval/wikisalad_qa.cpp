#include "core/eval/wikisalad_qa.h"

#include <chrono>

#include <nlohmann/json.hpp>

#include "core/chat/chat_format.h"
#include "core/eval/answer_match.h"
#include "core/eval/niah.h"
#include "core/eval/qa_results.h"
#include "core/run/run_loop.h"
#include "core/run/session.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/error.h"
#include "core/util/text_file.h"

namespace luka::eval {

const char* const kQaSystemPrompt =
    "You are a helpful assistant that answers questions based on the given context. Answer in a few words or a short "
    "phrase. Do not include explanations.";

std::string qa_user_message(const std::string& context, const std::string& question) {
  return context + "\n\nQuestion: " + question + "\nAnswer:";
}

QaPrompt qa_prompt(const Tokenizer& tokenizer, const QaQuestion& q, bool query_agnostic) {
  ChatOptions chat;
  const std::string text = format_chatml({{"system", kQaSystemPrompt}, {"user", qa_user_message(q.context, q.text)}}, chat,
                                         is_hybrid_thinking(tokenizer.config()));
  QaPrompt p;
  p.ids = tokenizer.with_sequence_bos(tokenizer.encode(text));
  if (query_agnostic) {
    std::size_t question_at = text.rfind("\n\nQuestion: " + q.text);  // the context keeps its blank line
    if (question_at != std::string::npos) question_at += 2;
    p.context_tokens = context_token_count(tokenizer, text, question_at, p.ids);
  }
  return p;
}

QaRecord answer_question(RunSession& session, const Tokenizer& tokenizer, const std::string& preset, const QaQuestion& q,
                         const QaPrompt& prompt, std::int64_t max_new_tokens, const std::vector<std::int32_t>& stop_ids) {
  const auto start = std::chrono::steady_clock::now();
  RunSettings run;
  run.max_new_tokens = max_new_tokens;
  run.stop_ids = stop_ids;
  run.context_tokens = prompt.context_tokens;
  const RunResult result = session.loop().run(prompt.ids, run);
  std::vector<std::int32_t> shown;
  for (const std::int32_t id : result.ids)
    if (!tokenizer.is_special(id)) shown.push_back(id);
  QaRecord r;
  r.preset = preset;
  r.file = q.file;
  r.difficulty = q.difficulty;
  r.example = q.example;
  r.example_id = q.example_id;
  r.question = q.question;
  r.question_text = q.text;
  r.answers = q.answers;
  r.prediction = strip_space(tokenizer.decode(shown));
  r.match = lenient_match(r.prediction, r.answers);
  r.prompt_tokens = result.prompt_tokens;
  r.new_tokens = static_cast<std::int64_t>(result.ids.size());
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

std::string difficulty_of(const std::string& stem) {
  // The stem up to "_<digits>topic".
  for (std::size_t at = stem.find('_'); at != std::string::npos; at = stem.find('_', at + 1)) {
    std::size_t i = at + 1;
    while (i < stem.size() && stem[i] >= '0' && stem[i] <= '9') ++i;
    if (i > at + 1 && stem.compare(i, 5, "topic") == 0) return stem.substr(0, at);
  }
  return stem;
}

int difficulty_rank(const std::string& difficulty) {
  static const char* const kOrder[] = {"easy", "medium", "hard", "very_hard"};
  for (int i = 0; i < 4; ++i)
    if (difficulty == kOrder[i]) return i;
  return 4;
}

std::vector<QaQuestion> load_qa_questions(const std::filesystem::path& file, int first, int count) {
  using nlohmann::json;
  const json root = read_json_file(file, "WikiSalad file");
  const std::string name = file.string();
  if (!root.is_array()) fail(name, "expected a JSON list of WikiSalad examples");
  if (first < 0 || static_cast<std::size_t>(first) >= root.size())
    fail(name, "example " + std::to_string(first) + " is out of range (the file has " + std::to_string(root.size()) + " examples)");
  const std::size_t end = count < 0 ? root.size() : std::min(root.size(), static_cast<std::size_t>(first) + static_cast<std::size_t>(count));
  const std::string stem = file.stem().string();
  std::vector<QaQuestion> out;
  for (std::size_t e = static_cast<std::size_t>(first); e < end; ++e) {
    const json& ex = root[e];
    const std::string where = name + ": example " + std::to_string(e);
    if (!ex.is_object() || !ex.contains("prompt") || !ex["prompt"].is_string()) fail(where, "expected an object with a \"prompt\" string");
    if (!ex.contains("questions") || !ex["questions"].is_array()) fail(where, "expected a \"questions\" list");
    std::string id = std::to_string(e);
    if (ex.contains("example_id")) id = ex["example_id"].is_string() ? ex["example_id"].get<std::string>() : ex["example_id"].dump();
    const json& questions = ex["questions"];
    for (std::size_t q = 0; q < questions.size(); ++q) {
      const json& item = questions[q];
      const std::string at = where + ", question " + std::to_string(q);
      if (!item.is_object() || !item.contains("question") || !item["question"].is_string())
        fail(at, "expected an object with a \"question\" string");
      QaQuestion out_q;
      out_q.file = stem;
      out_q.difficulty = difficulty_of(stem);
      out_q.example = static_cast<int>(e);
      out_q.example_id = id;
      out_q.question = static_cast<int>(q);
      out_q.text = item["question"].get<std::string>();
      out_q.context = ex["prompt"].get<std::string>();
      if (item.contains("answers")) {
        const json& answers = item["answers"];
        const json* texts = answers.is_object() && answers.contains("text") ? &answers["text"] : &answers;
        if (!texts->is_array()) fail(at, "\"answers\" must hold a \"text\" list");
        for (const json& a : *texts) {
          if (!a.is_string()) fail(at, "an answer is not a string");
          out_q.answers.push_back(a.get<std::string>());
        }
      }
      out.push_back(std::move(out_q));
    }
  }
  return out;
}

}  // namespace luka::eval
