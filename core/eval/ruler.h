// RULER's synthetic tasks (Hsieh et al. 2024, "RULER: What's the Real Context Size of Your
// Long-Context Language Models?"), written here from its task definitions: the needle tasks
// (single 1-3, multikey 1-3, multivalue, multiquery), variable tracking, common- and
// frequent-words extraction, and a QA task over the shared WikiSalad paragraphs in place of
// SQuAD/HotpotQA. Every sample is exactly `length` tokens of the model's tokenizer; where a task's
// body grows in whole units (lines, list items, documents) the shortfall of less than a unit is
// filled by RULER's repeated noise sentences at the start of the context. No LibTorch here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/eval/niah.h"

namespace luka::eval {

// The task names in RULER's order: niah_single_1..3, niah_multikey_1..3, niah_multivalue,
// niah_multiquery, vt, cwe, fwe, qa.
const std::vector<std::string>& ruler_tasks();
bool is_ruler_task(const std::string& name);
ScoreMetric ruler_metric(const std::string& task);  // qa: string_match_part; the rest string_match_all

// RULER's noise haystack: five short sentences repeated.
extern const char* const kRulerNoise;

// Paragraphs and questions for the QA task: every distinct WikiSalad paragraph is a document,
// and every answerable question points at the paragraph it was asked about.
struct QaPool {
  struct Item {
    std::string question;
    std::vector<std::string> answers;
    std::size_t document = 0;
  };
  std::vector<std::string> documents;
  std::vector<Item> items;
};
// A WikiSalad .json file or a folder of them (name order). Throws luka::Error naming the file.
QaPool load_qa_pool(const std::filesystem::path& path);

// What the tasks draw from: the essay haystack (niah_single_2/3, niah_multikey_1, multivalue,
// multiquery; its words are cwe's vocabulary) and the QA pool (qa only; may be null otherwise).
struct RulerSources {
  const Haystack* essay = nullptr;
  const QaPool* qa = nullptr;
  std::vector<std::string> words;  // cwe's vocabulary: distinct lower-case words of the essay
  static std::vector<std::string> vocabulary(const Haystack& essay);
};

// Sample `index` of `task` at `length` tokens. Throws luka::Error for an unknown task, a missing
// source, or a length too short for the task.
LongContextSample make_ruler_sample(const std::string& task, const RulerSources& sources, const Tokenizer& tokenizer,
                                    const PromptFormat& format, std::int64_t length, int index, std::uint64_t seed);

}  // namespace luka::eval
