// The WikiSalad QA harness's pieces: the exact prompt strings, questions read from a file, the
// results file a stopped run resumes from, and Table 1's tabulation.
#include <gtest/gtest.h>

#include <filesystem>
#include <algorithm>
#include <fstream>

#include "core/chat/chat_format.h"
#include "core/eval/qa_results.h"
#include "core/eval/wikisalad_qa.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/error.h"
#include "tests/process_util.h"

namespace fs = std::filesystem;
using namespace luka::eval;

namespace {
fs::path work_dir() { return luka::test::test_dir("eval"); }
}  // namespace

TEST(WikiSaladQa, PromptIsTheAuthorsStringsThroughTheChatTemplate) {
  EXPECT_STREQ(kQaSystemPrompt,
               "You are a helpful assistant that answers questions based on the given context. Answer in a few words or a "
               "short phrase. Do not include explanations.");
  EXPECT_EQ(qa_user_message("# Segment 1: X\n\nText.", "Who?"), "# Segment 1: X\n\nText.\n\nQuestion: Who?\nAnswer:");
  // What the model reads (SmolLM2 and Qwen3 share ChatML; Qwen3 adds the empty think block).
  const std::string chat = luka::format_chatml({{"system", kQaSystemPrompt}, {"user", qa_user_message("C", "Q?")}}, {}, false);
  EXPECT_EQ(chat, std::string("<|im_start|>system\n") + kQaSystemPrompt + "<|im_end|>\n<|im_start|>user\nC\n\nQuestion: Q?\nAnswer:<|im_end|>\n"
                  "<|im_start|>assistant\n");
}

// A question as the model reads it, with the Qwen3 tokenizer: the chat template's ids, and for a
// query-agnostic run the leading ids of the context alone (through its blank line), after which
// the question follows.
TEST(WikiSaladQa, AQueryAgnosticPromptSplitsBeforeTheQuestion) {
  const fs::path tok = fs::path(LUKA_SHARED_DATA) / "qwen3-tokenizer";
  if (!fs::exists(tok / "tokenizer.json")) GTEST_SKIP() << "needs the Qwen3 tokenizer under " << tok << " (../shared/data is absent)";
  const luka::Tokenizer t = luka::Tokenizer::load(tok);
  QaQuestion q;
  q.context = "# Segment 1: Lighthouse\n\nThe keeper lit the lamp at 18:40 and sounded the fog signal from 01:10.";
  q.text = "When was the lamp lit?";
  const QaPrompt aware = qa_prompt(t, q, false), agnostic = qa_prompt(t, q, true);
  EXPECT_EQ(aware.context_tokens, 0);
  EXPECT_EQ(agnostic.ids, aware.ids);
  const std::string text = luka::format_chatml({{"system", kQaSystemPrompt}, {"user", qa_user_message(q.context, q.text)}}, {},
                                               luka::is_hybrid_thinking(t.config()));
  EXPECT_EQ(aware.ids, t.with_sequence_bos(t.encode(text)));
  const std::vector<std::int32_t> head = t.with_sequence_bos(t.encode(text.substr(0, text.rfind("Question: "))));
  EXPECT_EQ(agnostic.context_tokens, static_cast<std::int64_t>(head.size()));  // "\n\n" and "Question" stay apart
  EXPECT_TRUE(std::equal(head.begin(), head.end(), agnostic.ids.begin()));
  const std::string rest =
      t.decode(std::vector<std::int32_t>(agnostic.ids.begin() + agnostic.context_tokens, agnostic.ids.end()));
  EXPECT_EQ(rest.rfind("Question: When was the lamp lit?", 0), 0u) << rest;
}

TEST(WikiSaladQa, DifficultyFromTheFileName) {
  EXPECT_EQ(difficulty_of("easy_2topic_short"), "easy");
  EXPECT_EQ(difficulty_of("very_hard_3topic_long"), "very_hard");
  EXPECT_EQ(difficulty_of("mine"), "mine");
  EXPECT_EQ(difficulty_of("odd_topic"), "odd_topic");
  EXPECT_LT(difficulty_rank("medium"), difficulty_rank("hard"));
  EXPECT_EQ(difficulty_rank("mine"), 4);
}

TEST(WikiSaladQa, QuestionsOfTheChosenExamples) {
  const fs::path f = work_dir() / "hard_3topic_tiny.json";
  std::ofstream(f) << R"([{"example_id": 7, "prompt": "P0", "questions": [{"question": "a?", "answers": {"text": ["x", "y"]}}]},
                          {"example_id": "e1", "prompt": "P1", "questions": [{"question": "b?", "answers": {"text": []}},
                                                                             {"question": "c?", "answers": {"text": ["z"]}}]},
                          {"prompt": "P2", "questions": []}])";
  const auto all = load_qa_questions(f, 0, -1);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].example_id, "7");
  EXPECT_EQ(all[0].answers, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(all[1].context, "P1");
  EXPECT_TRUE(all[1].answers.empty());
  EXPECT_EQ(all[2].question, 1);
  EXPECT_EQ(all[2].difficulty, "hard");
  EXPECT_EQ(all[2].file, "hard_3topic_tiny");
  const auto second = load_qa_questions(f, 1, 1);
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[0].text, "b?");
  EXPECT_THROW(load_qa_questions(f, 3, 1), luka::Error);
  std::ofstream(work_dir() / "bad.json") << R"([{"prompt": "P", "questions": [{"question": 5}]}])";
  try {
    load_qa_questions(work_dir() / "bad.json", 0, 1);
    FAIL() << "a question that is not a string must be refused";
  } catch (const luka::Error& e) {
    EXPECT_NE(std::string(e.what()).find("example 0, question 0"), std::string::npos) << e.what();
  }
}

TEST(QaResults, ReadsBackCompleteLinesAndDropsACutLastLine) {
  QaRecord r;
  r.preset = "mixed(8,8)";
  r.file = "easy_2topic_short";
  r.difficulty = "easy";
  r.example = 3;
  r.example_id = "3";
  r.question = 1;
  r.question_text = "Q\u2028?";
  r.answers = {"a"};
  r.prediction = "an \"answer\"\n";
  r.match = true;
  r.prompt_tokens = 500;
  r.new_tokens = 4;
  r.seconds = 1.25;
  const fs::path f = work_dir() / "results.jsonl";
  const std::string line = to_json(r).dump() + "\n";
  std::ofstream(f, std::ios::binary) << line << line << line.substr(0, 20);
  const ResultsFile back = read_results(f);
  ASSERT_EQ(back.records.size(), 2u);
  EXPECT_EQ(back.valid_bytes, 2 * line.size());
  EXPECT_EQ(to_json(back.records[1]), to_json(r));
  EXPECT_EQ(record_key(back.records[0]), record_key("mixed(8,8)", "easy_2topic_short", 3, 1));
  EXPECT_TRUE(read_results(work_dir() / "absent.jsonl").records.empty());
  std::ofstream(f, std::ios::binary) << line << "{\"preset\": 1}\n";
  try {
    read_results(f);
    FAIL() << "a malformed complete line must be refused";
  } catch (const luka::Error& e) {
    EXPECT_NE(std::string(e.what()).find("results.jsonl:2"), std::string::npos) << e.what();
  }
}

TEST(QaResults, TableOneLayout) {
  std::vector<QaRecord> records;
  const auto add = [&](const std::string& preset, const std::string& difficulty, bool match) {
    QaRecord r;
    r.preset = preset;
    r.difficulty = difficulty;
    r.match = match;
    records.push_back(r);
  };
  add("dense", "hard", true);
  add("dense", "easy", true);
  add("dense", "easy", false);
  add("lined", "easy", false);
  add("other", "easy", true);  // not asked for: left out
  const EmTable t = tabulate(records, {"dense", "lined"});
  EXPECT_EQ(t.difficulties, (std::vector<std::string>{"easy", "hard"}));
  EXPECT_EQ(t.cells.at({"easy", "dense"}).questions, 2);
  EXPECT_DOUBLE_EQ(t.cells.at({"easy", "dense"}).em(), 50.0);
  EXPECT_DOUBLE_EQ(t.totals.at("dense").em(), 100.0 * 2 / 3);
  EXPECT_EQ(t.cells.count({"hard", "lined"}), 0u);
  EXPECT_EQ(format_table(t),
            "dataset  dense      lined\n"
            "easy     50.0 (2)   0.0 (1)\n"
            "hard     100.0 (1)  -\n"
            "all      66.7 (3)   0.0 (1)\n");
}

TEST(QaResults, ConfigFileColumnsAreHeadedByTheirFileNames) {
  std::vector<QaRecord> records;
  for (const std::string preset : {"dense", "bench/out/auto-0.185.json", "a/same.json", "b/same.json"}) {
    QaRecord r;
    r.preset = preset;
    r.difficulty = "easy";
    r.match = true;
    records.push_back(r);
  }
  const EmTable t = tabulate(records, {"dense", "bench/out/auto-0.185.json", "a/same.json", "b/same.json"});
  // Two files named same.json keep their paths, so the columns stay told apart.
  EXPECT_EQ(format_table(t),
            "dataset  dense      auto-0.185.json  a/same.json  b/same.json\n"
            "easy     100.0 (1)  100.0 (1)        100.0 (1)    100.0 (1)\n"
            "all      100.0 (1)  100.0 (1)        100.0 (1)    100.0 (1)\n");
  // The summary's JSON keeps every preset as given.
  EXPECT_TRUE(table_json(t).dump().find("bench/out/auto-0.185.json") != std::string::npos);
}
