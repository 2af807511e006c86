#include "core/eval/ruler.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "core/tokenizer/tokenizer.h"
#include "core/util/error.h"
#include "core/util/text_file.h"

namespace luka::eval {

const char* const kRulerNoise =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";

const std::vector<std::string>& ruler_tasks() {
  static const std::vector<std::string> tasks = {"niah_single_1",
                                                 "niah_single_2",
                                                 "niah_single_3",
                                                 "niah_multikey_1",
                                                 "niah_multikey_2",
                                                 "niah_multikey_3",
                                                 "niah_multivalue",
                                                 "niah_multiquery",
                                                 "vt",
                                                 "cwe",
                                                 "fwe",
                                                 "qa"};
  return tasks;
}

bool is_ruler_task(const std::string& name) {
  const auto& t = ruler_tasks();
  return std::find(t.begin(), t.end(), name) != t.end();
}

ScoreMetric ruler_metric(const std::string& task) { return task == "qa" ? ScoreMetric::kPart : ScoreMetric::kAll; }

// [SECTION] Sources

namespace {

std::string trim(const std::string& s) {
  std::size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

// The paragraphs of a WikiSalad prompt, segment by segment: the text between a "# Segment i: Title"
// header and the segment's "Question i:" line (or the next header).
std::vector<std::string> wikisalad_paragraphs(const std::string& prompt) {
  std::vector<std::string> out;
  std::size_t at = 0;
  const std::string header = "# Segment ";
  while ((at = prompt.find(header, at)) != std::string::npos) {
    if (at != 0 && prompt[at - 1] != '\n') {
      at += header.size();
      continue;
    }
    const std::size_t body = prompt.find('\n', at);
    if (body == std::string::npos) break;
    std::size_t end = prompt.find("\n# Segment ", body);
    if (end == std::string::npos) end = prompt.size();
    std::string text = prompt.substr(body + 1, end - body - 1);
    const std::size_t q = text.find("\nQuestion ");
    if (q != std::string::npos) text = text.substr(0, q);
    out.push_back(trim(text));
    at = end;
  }
  return out;
}

}  // namespace

QaPool load_qa_pool(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  using nlohmann::json;
  std::error_code ec;
  std::vector<fs::path> files;
  if (fs::is_directory(path, ec)) {
    for (const auto& e : fs::directory_iterator(path, ec))
      if (e.path().extension() == ".json") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    if (files.empty()) fail(path.string(), "no WikiSalad .json files in the folder");
  } else if (fs::exists(path, ec)) {
    files.push_back(path);
  } else {
    fail(path.string(), "no such WikiSalad file or folder");
  }
  QaPool pool;
  std::map<std::string, std::size_t> index;
  for (const fs::path& f : files) {
    const json root = read_json_file(f, "WikiSalad file");
    if (!root.is_array()) fail(f.string(), "expected a JSON list of WikiSalad examples");
    for (std::size_t e = 0; e < root.size(); ++e) {
      const json& ex = root[e];
      const std::string where = f.string() + ": example " + std::to_string(e);
      if (!ex.is_object() || !ex.contains("prompt") || !ex["prompt"].is_string())
        fail(where, "expected an object with a \"prompt\" string");
      if (!ex.contains("questions") || !ex["questions"].is_array()) fail(where, "expected a \"questions\" list");
      const std::vector<std::string> paragraphs = wikisalad_paragraphs(ex["prompt"].get<std::string>());
      for (const json& q : ex["questions"]) {
        if (!q.is_object() || !q.contains("question") || !q["question"].is_string() || !q.contains("segment_id") ||
            !q["segment_id"].is_number_integer())
          fail(where, "a question needs a \"question\" string and an integer \"segment_id\"");
        const std::int64_t seg = q["segment_id"].get<std::int64_t>();
        if (seg < 0 || seg >= static_cast<std::int64_t>(paragraphs.size()))
          fail(where, "segment_id " + std::to_string(seg) + " is not one of the prompt's " +
                          std::to_string(paragraphs.size()) + " segments");
        QaPool::Item item;
        item.question = q["question"].get<std::string>();
        if (q.contains("answers") && q["answers"].is_object() && q["answers"].contains("text") &&
            q["answers"]["text"].is_array())
          for (const json& a : q["answers"]["text"])
            if (a.is_string() && !a.get<std::string>().empty()) item.answers.push_back(a.get<std::string>());
        if (item.answers.empty()) continue;  // unanswerable: nothing to score
        const std::string& text = paragraphs[static_cast<std::size_t>(seg)];
        auto [it, added] = index.emplace(text, pool.documents.size());
        if (added) pool.documents.push_back(text);
        item.document = it->second;
        pool.items.push_back(std::move(item));
      }
      // Paragraphs no question asks about are documents too (distractors).
      for (const std::string& text : paragraphs)
        if (index.emplace(text, pool.documents.size()).second) pool.documents.push_back(text);
    }
  }
  if (pool.items.empty()) fail(path.string(), "no answerable questions");
  return pool;
}

std::vector<std::string> RulerSources::vocabulary(const Haystack& essay) {
  std::set<std::string> noise;
  {
    std::string w;
    for (const char c : std::string(kRulerNoise) + " ") {
      if (std::isalpha(static_cast<unsigned char>(c))) {
        w += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      } else {
        if (!w.empty()) noise.insert(w);
        w.clear();
      }
    }
  }
  std::set<std::string> words;
  std::string w;
  bool clean = true;  // the word is lower-case ASCII letters only
  for (const char c : essay.text() + " ") {
    if (std::isalpha(static_cast<unsigned char>(c)) || static_cast<unsigned char>(c) >= 0x80) {
      clean = clean && c >= 'a' && c <= 'z';
      w += c;
      continue;
    }
    if (clean && w.size() >= 4 && w.size() <= 10 && !noise.count(w)) words.insert(w);
    w.clear();
    clean = true;
  }
  return {words.begin(), words.end()};
}

// [SECTION] Building a sample to an exact length

namespace {

std::uint64_t fnv(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return h;
}

std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The task's question around its context: head + context + tail, then the answer prefix.
struct Template {
  std::string head, tail, answer_prefix;
};

struct TokenizedWindow {
  std::string text;
  std::vector<TokenSpanBytes> spans;
};

TokenizedWindow tokenized(const Tokenizer& tokenizer, std::string text, std::int64_t tokens) {
  TokenizedWindow w;
  w.text = std::move(text);
  for (const TokenSpan& t : tokenizer.encode_with_offsets(w.text, static_cast<std::size_t>(tokens) + 8))
    w.spans.push_back({t.begin, t.end});
  return w;
}

TokenizedWindow noise_window(const Tokenizer& tokenizer, std::int64_t length) {
  std::string text;
  const std::size_t chars = static_cast<std::size_t>(length) * 8 + 1024;
  while (text.size() < chars) text += std::string(kRulerNoise) + " ";
  return tokenized(tokenizer, std::move(text), length);
}

[[noreturn]] void too_short(const std::string& task, std::int64_t length) {
  fail(task, "a length of " + std::to_string(length) + " tokens is too short for the task's question and answers");
}

// A haystack text cut to the token, with the needles inserted at their depths.
void fit_haystack(LongContextSample& s, const Tokenizer& tokenizer, const PromptFormat& format, const Template& t,
                  const TokenizedWindow& w, const std::vector<std::pair<double, std::string>>& inserts) {
  bool apart = false;
  const auto build = [&](std::int64_t k) {
    const std::string cut = cut_and_insert(w.text, w.spans, k, inserts);
    return format_prompt(format, t.head + (apart ? keep_apart(cut) : cut) + t.tail, t.answer_prefix);
  };
  std::optional<ExactFit> fit = fit_exact(tokenizer, s.length, static_cast<std::int64_t>(w.spans.size()), build);
  if (!fit) {
    apart = true;
    fit = fit_exact(tokenizer, s.length, static_cast<std::int64_t>(w.spans.size()), build);
  }
  if (!fit) {
    if (largest_within(tokenizer, s.length, 0, build) < 0) too_short(s.task, s.length);
    fail(s.task, "no haystack cut gives exactly " + std::to_string(s.length) + " tokens");
  }
  s.text = fit->text;
  s.ids = fit->ids;
  s.filler = fit->k;
  s.question_at = s.text.rfind(t.tail);
}

// A body of whole units (the most that fit), then noise sentences to the exact length.
void fit_units(LongContextSample& s, const Tokenizer& tokenizer, const PromptFormat& format, const Template& t,
               std::int64_t max_units, const std::function<std::string(std::int64_t)>& body) {
  const auto wrap = [&](const std::string& context) {
    return format_prompt(format, t.head + context + t.tail, t.answer_prefix);
  };
  const std::int64_t most =
      largest_within(tokenizer, s.length, max_units, [&](std::int64_t u) { return wrap(body(u)); });
  if (most < 0) too_short(s.task, s.length);
  const TokenizedWindow noise = noise_window(tokenizer, s.length);
  for (std::int64_t u = most; u >= std::max<std::int64_t>(0, most - 3); --u) {
    const std::string b = body(u);
    for (const bool apart : {false, true}) {
      const auto build = [&](std::int64_t p) {
        const std::string cut = cut_and_insert(noise.text, noise.spans, p, {});
        return wrap(p == 0 ? b : (apart ? keep_apart(cut) : cut) + "\n" + b);
      };
      if (const std::optional<ExactFit> fit =
              fit_exact(tokenizer, s.length, static_cast<std::int64_t>(noise.spans.size()), build)) {
        s.text = fit->text;
        s.ids = fit->ids;
        s.filler = u;
        s.question_at = s.text.rfind(t.tail);
        return;
      }
    }
  }
  fail(s.task, "no body and padding give exactly " + std::to_string(s.length) + " tokens");
}

void locate(LongContextSample& s, const std::vector<std::string>& needles) {
  std::size_t from = 0;
  for (const std::string& n : needles) {
    const std::size_t at = s.text.find(n, from);
    if (at == std::string::npos) continue;
    s.needles.push_back({at, at + n.size()});
    from = at + n.size();
  }
}

std::string join_keys(const std::vector<std::string>& keys) {
  if (keys.size() == 1) return keys[0];
  std::string out;
  for (std::size_t i = 0; i + 1 < keys.size(); ++i) out += keys[i] + ", ";
  return out + "and " + keys.back();
}

// [SECTION] The needle tasks

struct NeedleTask {
  enum Haystack { kEssay, kNoise, kNeedles } haystack;
  bool uuid_keys, uuid_values;
  int keys, values, queries;
};

NeedleTask needle_task(const std::string& task) {
  if (task == "niah_single_1") return {NeedleTask::kNoise, false, false, 1, 1, 1};
  if (task == "niah_single_2") return {NeedleTask::kEssay, false, false, 1, 1, 1};
  if (task == "niah_single_3") return {NeedleTask::kEssay, false, true, 1, 1, 1};
  if (task == "niah_multikey_1") return {NeedleTask::kEssay, false, false, 4, 1, 1};
  if (task == "niah_multikey_2") return {NeedleTask::kNeedles, false, false, 1, 1, 1};
  if (task == "niah_multikey_3") return {NeedleTask::kNeedles, true, true, 1, 1, 1};
  if (task == "niah_multivalue") return {NeedleTask::kEssay, false, false, 1, 4, 1};
  return {NeedleTask::kEssay, false, false, 4, 1, 4};  // niah_multiquery
}

std::string ruler_needle(const std::string& kind, const std::string& key, const std::string& value) {
  return "One of the special magic " + kind + " for " + key + " is: " + value + ".";
}

LongContextSample needle_sample(LongContextSample s, const NeedleTask& n, const RulerSources& src,
                                const Tokenizer& tokenizer, const PromptFormat& format, Rng& rng) {
  const std::string kind = n.uuid_values ? "uuids" : "numbers";
  std::set<std::string> used_keys, used_values;
  const auto key = [&] {
    for (;;) {
      std::string k = n.uuid_keys ? random_uuid(rng) : random_word_key(rng);
      if (used_keys.insert(k).second) return k;
    }
  };
  const auto value = [&] {
    for (;;) {
      std::string v = n.uuid_values ? random_uuid(rng) : random_number(rng);
      if (used_values.insert(v).second) return v;
    }
  };
  std::vector<std::string> keys;
  for (int i = 0; i < n.keys; ++i) keys.push_back(key());
  std::vector<std::pair<std::string, std::string>> needles;  // key, value
  for (const std::string& k : keys)
    for (int v = 0; v < n.values; ++v) needles.emplace_back(k, value());
  const std::vector<std::string> queried(keys.begin(), keys.begin() + n.queries);
  for (const auto& [k, v] : needles)
    if (std::find(queried.begin(), queried.end(), k) != queried.end()) s.answers.push_back(v);
  s.query = join_keys(queried);
  Template t;
  t.head = "Some special magic " + kind +
           " are hidden within the following text. Make sure to memorize it. I will quiz you about the " + kind +
           " afterwards.\n";
  t.tail = "\nWhat are all the special magic " + kind + " for " + s.query + " mentioned in the provided text?";
  t.answer_prefix = " The special magic " + kind + " for " + s.query + " mentioned in the provided text are";
  rng.shuffle(needles);
  std::vector<std::string> texts;

  if (n.haystack == NeedleTask::kNeedles) {
    // The haystack is other needles, one per line; the real one at a random place among them.
    const double place = rng.uniform();
    std::vector<std::string> lines;
    // A line is well over 8 tokens; word keys run out at 64 x 64.
    const std::int64_t max_units = std::min<std::int64_t>(s.length / 8, 3000);
    while (static_cast<std::int64_t>(lines.size()) < max_units) lines.push_back(ruler_needle(kind, key(), value()));
    const std::string real = ruler_needle(kind, needles[0].first, needles[0].second);
    texts.push_back(real);
    fit_units(s, tokenizer, format, t, max_units, [&](std::int64_t u) {
      const std::int64_t at = std::min<std::int64_t>(u, static_cast<std::int64_t>(place * static_cast<double>(u + 1)));
      std::string body;
      for (std::int64_t i = 0; i <= u; ++i) {
        if (i) body += "\n";
        body += i == at ? real : lines[static_cast<std::size_t>(i < at ? i : i - 1)];
      }
      return body;
    });
    locate(s, texts);
    return s;
  }

  std::vector<double> depths;
  for (std::size_t i = 0; i < needles.size(); ++i) depths.push_back(rng.uniform());
  std::sort(depths.begin(), depths.end());
  std::vector<std::pair<double, std::string>> inserts;
  for (std::size_t i = 0; i < needles.size(); ++i) {
    texts.push_back(ruler_needle(kind, needles[i].first, needles[i].second));
    inserts.emplace_back(depths[i], texts.back());
  }
  TokenizedWindow w;
  if (n.haystack == NeedleTask::kNoise) {
    w = noise_window(tokenizer, s.length);
  } else {
    if (!src.essay) fail(s.task, "the task needs an essay haystack");
    w = tokenized(tokenizer, src.essay->window(rng, static_cast<std::size_t>(s.length) * 8 + 4096), s.length);
  }
  fit_haystack(s, tokenizer, format, t, w, inserts);
  locate(s, texts);
  return s;
}

// [SECTION] Variable tracking: one chain of 4 hops in the noise haystack.

LongContextSample vt_sample(LongContextSample s, const Tokenizer& tokenizer, const PromptFormat& format, Rng& rng) {
  constexpr int kHops = 4;
  std::set<std::string> used;
  std::vector<std::string> vars;
  while (static_cast<int>(vars.size()) < kHops + 1) {
    std::string v;
    for (int i = 0; i < 5; ++i) v += static_cast<char>('A' + rng.below(26));
    if (used.insert(v).second) vars.push_back(v);
  }
  const std::string value = random_number(rng, 5);
  s.query = value;
  s.answers = vars;
  std::vector<std::string> statements = {"VAR " + vars[0] + " = " + value + "."};
  for (int i = 1; i <= kHops; ++i)
    statements.push_back("VAR " + vars[static_cast<std::size_t>(i)] + " = VAR " +
                         vars[static_cast<std::size_t>(i - 1)] + ".");
  std::vector<double> depths;
  for (std::size_t i = 0; i < statements.size(); ++i) depths.push_back(rng.uniform());
  std::sort(depths.begin(), depths.end());
  std::vector<std::pair<double, std::string>> inserts;
  for (std::size_t i = 0; i < statements.size(); ++i) inserts.emplace_back(depths[i], statements[i]);
  Template t;
  t.head = "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n";
  t.tail = "\nQuestion: Find all variables that are assigned the value " + value + " in the text above.";
  t.answer_prefix = " Answer: According to the chain(s) of variable assignment in the text above, " +
                    std::to_string(kHops + 1) + " variables are assigned the value " + value + ", they are: ";
  fit_haystack(s, tokenizer, format, t, noise_window(tokenizer, s.length), inserts);
  locate(s, statements);
  return s;
}

// [SECTION] Common-words extraction: 10 words `freq` times each among words 3 times each, in a
// numbered list. RULER asks 30 repetitions at 4K tokens and more; shorter lists scale it down
// (length / 128, at least 4) so the common words do not fill the whole list.

LongContextSample cwe_sample(LongContextSample s, const RulerSources& src, const Tokenizer& tokenizer,
                             const PromptFormat& format, Rng& rng) {
  constexpr int kCommon = 10, kRare = 3;
  const int freq = static_cast<int>(std::clamp<std::int64_t>(s.length / 128, 4, 30));
  std::vector<std::string> words = src.words;
  if (words.size() < kCommon + 10)
    fail(s.task,
         "the essay haystack has too few distinct words for a vocabulary (" + std::to_string(words.size()) + ")");
  rng.shuffle(words);
  s.answers.assign(words.begin(), words.begin() + kCommon);
  const std::uint64_t base = rng.next();
  // Each occurrence has a fixed random rank, so a longer list only interleaves more words.
  struct Item {
    std::uint64_t rank;
    std::size_t word;
  };
  std::vector<Item> common;
  for (std::size_t w = 0; w < kCommon; ++w)
    for (int j = 0; j < freq; ++j)
      common.push_back({mix(base ^ fnv(words[w]) ^ mix(static_cast<std::uint64_t>(j))), w});
  const std::int64_t max_units = static_cast<std::int64_t>(words.size()) - kCommon;
  Template t;
  t.head =
      "Below is a numbered list of words. In these words, some appear more often than others. Memorize the ones that "
      "appear most often.\n";
  t.tail = "\nQuestion: What are the 10 most common words in the above list?";
  t.answer_prefix = " Answer: The top 10 words that appear most often in the list are:";
  s.query = "the 10 most common words";
  fit_units(s, tokenizer, format, t, max_units, [&](std::int64_t u) {
    std::vector<Item> items = common;
    for (std::size_t w = kCommon; w < kCommon + static_cast<std::size_t>(u); ++w)
      for (int j = 0; j < kRare; ++j)
        items.push_back({mix(base ^ fnv(words[w]) ^ mix(static_cast<std::uint64_t>(j))), w});
    std::sort(items.begin(), items.end(),
              [](const Item& a, const Item& b) { return a.rank != b.rank ? a.rank < b.rank : a.word < b.word; });
    std::string body;
    for (std::size_t i = 0; i < items.size(); ++i)
      body += (i ? " " : "") + std::to_string(i + 1) + ". " + words[items[i].word];
    return body;
  });
  return s;
}

// [SECTION] Frequent-words extraction: coded words (random 5-letter strings) with Zipf(2)
// frequencies, the word of rank r about n / (zeta(2) r^2) times; the answer is the top three.

LongContextSample fwe_sample(LongContextSample s, const Tokenizer& tokenizer, const PromptFormat& format, Rng& rng) {
  const std::int64_t max_words = s.length;
  std::vector<std::string> vocab;
  std::set<std::string> used;
  while (static_cast<std::int64_t>(vocab.size()) < max_words) {
    std::string w;
    for (int i = 0; i < 5; ++i) w += static_cast<char>('a' + rng.below(26));
    if (used.insert(w).second) vocab.push_back(w);
  }
  s.answers.assign(vocab.begin(), vocab.begin() + 3);
  s.query = "the three most frequent coded words";
  const std::uint64_t base = rng.next();
  const auto counts = [&](std::int64_t n) {
    constexpr double kZeta2 = 1.6449340668482264;
    std::vector<std::int64_t> c;
    std::int64_t total = 0;
    for (std::int64_t r = 1;; ++r) {
      const std::int64_t k =
          static_cast<std::int64_t>(std::floor(static_cast<double>(n) / (kZeta2 * static_cast<double>(r * r))));
      if (k < 1 || total + k > n) break;
      c.push_back(k);
      total += k;
    }
    while (total < n) {  // the rest once each
      c.push_back(1);
      ++total;
    }
    return c;
  };
  Template t;
  t.head =
      "Read the following coded text and track the frequency of each coded word. Find the three most frequently "
      "appeared coded words. ";
  t.tail =
      "\nQuestion: Do not provide any explanation. What are the three most frequently appeared words in the above "
      "coded text?";
  t.answer_prefix = " Answer: According to the coded text above, the three most frequently appeared words are:";
  // The top three must stand apart from the fourth: at least 40 words.
  const auto body = [&](std::int64_t u) {
    const std::int64_t n = u + 40;
    const std::vector<std::int64_t> c = counts(n);
    std::vector<std::pair<std::uint64_t, std::size_t>> items;
    for (std::size_t w = 0; w < c.size() && w < vocab.size(); ++w)
      for (std::int64_t j = 0; j < c[w]; ++j)
        items.push_back({mix(base ^ mix(w * 1000003ULL + static_cast<std::uint64_t>(j))), w});
    std::sort(items.begin(), items.end());
    std::string text;
    for (std::size_t i = 0; i < items.size(); ++i) text += (i ? " " : "") + vocab[items[i].second];
    return text;
  };
  fit_units(s, tokenizer, format, t, max_words - 40, body);
  return s;
}

// [SECTION] QA over WikiSalad paragraphs: the gold paragraph among distractors, RULER's
// "Document i:" layout, scored by string_match_part.

LongContextSample qa_sample(LongContextSample s, const RulerSources& src, const Tokenizer& tokenizer,
                            const PromptFormat& format, Rng& rng) {
  if (!src.qa) fail(s.task, "the qa task needs WikiSalad data");
  const QaPool& pool = *src.qa;
  const QaPool::Item& item = pool.items[static_cast<std::size_t>(rng.below(pool.items.size()))];
  s.query = item.question;
  s.answers = item.answers;
  std::vector<std::size_t> distractors;
  for (std::size_t d = 0; d < pool.documents.size(); ++d)
    if (d != item.document && pool.documents[d].find(item.answers[0]) == std::string::npos) distractors.push_back(d);
  rng.shuffle(distractors);
  const double place = rng.uniform();
  Template t;
  t.head =
      "Answer the question based on the given documents. Only give me the answer and do not output any other "
      "words.\n\nThe following are given documents.\n\n";
  t.tail =
      "\n\nAnswer the question based on the given documents. Only give me the answer and do not output any other "
      "words.\n\nQuestion: " +
      item.question;
  t.answer_prefix = " Answer:";
  const std::string gold = pool.documents[item.document];
  fit_units(s, tokenizer, format, t, static_cast<std::int64_t>(distractors.size()), [&](std::int64_t u) {
    const std::int64_t at = std::min<std::int64_t>(u, static_cast<std::int64_t>(place * static_cast<double>(u + 1)));
    std::string body;
    for (std::int64_t i = 0; i <= u; ++i) {
      const std::string& doc =
          i == at ? gold : pool.documents[distractors[static_cast<std::size_t>(i < at ? i : i - 1)]];
      body += (i ? "\n\n" : "") + std::string("Document ") + std::to_string(i + 1) + ":\n" + doc;
    }
    return body;
  });
  locate(s, {gold});
  return s;
}

}  // namespace

LongContextSample make_ruler_sample(const std::string& task, const RulerSources& sources, const Tokenizer& tokenizer,
                                    const PromptFormat& format, std::int64_t length, int index, std::uint64_t seed) {
  if (!is_ruler_task(task))
    fail(task,
         "not a RULER task (niah_single_1..3, niah_multikey_1..3, niah_multivalue, niah_multiquery, vt, cwe, fwe, qa)");
  Rng rng(seed, task, length, 0, index);
  LongContextSample s;
  s.task = task;
  s.length = length;
  s.index = index;
  s.metric = ruler_metric(task);
  if (task.rfind("niah_", 0) == 0)
    return needle_sample(std::move(s), needle_task(task), sources, tokenizer, format, rng);
  if (task == "vt") return vt_sample(std::move(s), tokenizer, format, rng);
  if (task == "cwe") return cwe_sample(std::move(s), sources, tokenizer, format, rng);
  if (task == "fwe") return fwe_sample(std::move(s), tokenizer, format, rng);
  return qa_sample(std::move(s), sources, tokenizer, format, rng);
}

}  // namespace luka::eval
