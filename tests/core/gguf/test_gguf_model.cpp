// Models from GGUF files against Hugging Face transformers: small random llama/qwen2/qwen3 files
// in F32, F16 and Q8_0, and the real SmolLM2-135M-Instruct (Q4_1/Q8_0) loaded by transformers
// with gguf_file=. References: tests/fixtures/gguf_reference.py.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/chat/chat_format.h"
#include "core/gguf/gguf.h"
#include "core/model/decoder.h"
#include "core/model/gguf_model.h"
#include "core/model/model.h"
#include "core/model/weights.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/error.h"
#include "core/util/npy.h"
#include "tests/core/gguf/gguf_builder.h"

namespace luka {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kFixtures = fs::path(LUKA_TEST_WORK) / "gguf";
const fs::path kSmolLM2 = fs::path(LUKA_SOURCE_DIR) / "models" / "smollm2-135m-instruct" / "SmolLM2-135M-Instruct.Q4_1.gguf";

json read_json(const fs::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

// Logits for ids[0..prompt) as one prefill (all rows), then each further id through decode().
at::Tensor prefill_then_decode(Decoder& decoder, const std::vector<std::int32_t>& ids, std::size_t prompt) {
  std::vector<at::Tensor> rows;
  rows.push_back(decoder.prefill(std::vector<std::int32_t>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(prompt)), true));
  for (std::size_t i = prompt; i < ids.size(); ++i) rows.push_back(decoder.decode(ids[i]).unsqueeze(0));
  return at::cat(rows, 0).to(at::kFloat);
}

at::Tensor reference(const fs::path& npy) {
  const NpyArray a = read_npy_f32(npy);
  return at::from_blob(const_cast<float*>(a.data.data()), a.shape, at::kFloat).clone();
}

class SmallGguf : public ::testing::TestWithParam<const char*> {};

TEST_P(SmallGguf, LogitsMatchTransformers) {
  const fs::path dir = kFixtures / GetParam();
  if (!fs::exists(dir / "model.gguf")) GTEST_SKIP() << "no fixture at " << dir;
  const json ids_json = read_json(dir / "ids.json");
  const auto ids = ids_json.at("ids").get<std::vector<std::int32_t>>();
  const auto prompt = ids_json.at("prompt").get<std::size_t>();
  ASSERT_GE(prompt, 16u);
  ASSERT_GE(ids.size() - prompt, 8u);
  const auto model = Model::load(dir / "model.gguf", LoadOptions{DType::kF32, 0});
  EXPECT_TRUE(model->is_gguf());
  EXPECT_EQ(to_string(model->config().arch), std::string(GetParam()));
  Decoder decoder(model);
  const at::Tensor ours = prefill_then_decode(decoder, ids, prompt);
  const at::Tensor ref = reference(dir / "logits.npy");
  ASSERT_EQ(ours.sizes(), ref.sizes());
  // The file's weights are exactly what the reference model holds (quantized values included):
  // only the fp32 summation order differs.
  EXPECT_LE((ours - ref).abs().max().item<double>(), 1e-4) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Archs, SmallGguf, ::testing::Values("qwen3", "qwen2", "llama"));

// The llama file's Q8_0 matrices (q/k rows permuted by the converter, an untied Q8_0 output) with
// WeightFormat::kQuantized: held as blocks only, and the prefill, which multiplies by dequantized
// slices of them, gives the dequantized model's logits; decode steps quantize their activations
// to 8 bits per block, so they stay within that quantization's error of the reference.
TEST(SmallGguf, QuantizedHoldsBlocksOnlyAndPrefillsAsTheDequantizedModel) {
  const fs::path dir = kFixtures / "llama";
  if (!fs::exists(dir / "model.gguf")) GTEST_SKIP() << "no fixture at " << dir;
  const auto ids = read_json(dir / "ids.json").at("ids").get<std::vector<std::int32_t>>();
  const auto prompt = read_json(dir / "ids.json").at("prompt").get<std::size_t>();
  const auto deq = Model::load(dir / "model.gguf", LoadOptions{DType::kF32, 0});
  const auto q = Model::load(dir / "model.gguf", LoadOptions{DType::kF32, 0, false, WeightFormat::kQuantized});
  for (const LayerWeights& l : q->weights().layers) {
    for (const at::Tensor* t : {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj, &l.up_proj, &l.down_proj})
      EXPECT_FALSE(t->defined()) << "a dequantized copy is held";
    EXPECT_TRUE(l.quantized.q_proj.defined() && l.quantized.down_proj.defined());
    EXPECT_TRUE(l.input_norm.defined());
  }
  EXPECT_FALSE(q->weights().lm_head.defined());
  EXPECT_TRUE(q->weights().quantized_lm_head.defined());
  EXPECT_TRUE(q->weights().embed_tokens.defined());  // F16 in this file: no blocks to keep
  EXPECT_LT(q->quantized_bytes(), deq->dequantized_bytes() / 2);  // the F16 embedding stays a tensor
  Decoder a(deq), b(q);
  const std::vector<std::int32_t> head(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(prompt));
  const at::Tensor pa = a.prefill(head, true), pb = b.prefill(head, true);
  EXPECT_LE((pa - pb).abs().max().item<double>(), 1e-5);
  const at::Tensor ref = reference(dir / "logits.npy");
  for (std::size_t i = prompt; i < ids.size(); ++i) {
    const at::Tensor row = b.decode(ids[i]);
    EXPECT_LE((row - ref[static_cast<std::int64_t>(i)]).abs().max().item<double>(), 0.02 * ref.abs().max().item<double>()) << i;
  }
}

// A block whose fp16 scale is Inf makes every value of it non-finite: refused at load whether the
// blocks are kept (their scales checked) or dequantized (the values checked).
TEST(SmallGguf, NonFiniteBlockScaleIsRefusedInEitherFormat) {
  const fs::path src = kFixtures / "llama" / "model.gguf";
  if (!fs::exists(src)) GTEST_SKIP() << "no fixture at " << src;
  const fs::path dir = fs::path(LUKA_TEST_WORK) / "gguf-nonfinite";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path bad = dir / "model.gguf";
  fs::copy_file(src, bad);
  std::uint64_t at = 0;
  {
    const auto file = gguf::File::open(src);
    const gguf::TensorInfo* t = file->find_tensor("blk.1.ffn_down.weight");
    ASSERT_NE(t, nullptr);
    ASSERT_EQ(t->type, gguf::GgmlType::kQ8_0);
    at = file->header_bytes() + t->offset + 5 * 34;  // the sixth block's scale: row 1 (128 values, 4 blocks a row)
  }
  {
    std::fstream f(bad, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(at));
    const char inf[2] = {0x00, 0x7C};
    f.write(inf, 2);
  }
  try {
    Model::load(bad, LoadOptions{DType::kF32, 0, false, WeightFormat::kQuantized});
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layers.1.down_proj has a non-finite scale in block 5 (row 1)"), std::string::npos) << e.what();
  }
  try {
    Model::load(bad, LoadOptions{DType::kF32, 0});
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layers.1.down_proj holds 32 non-finite values"), std::string::npos) << e.what();
  }
}

TEST(SmallGguf, ConfigFromMetadata) {
  const fs::path file = kFixtures / "qwen2" / "model.gguf";
  if (!fs::exists(file)) GTEST_SKIP() << "no fixture at " << file;
  const ModelConfig c = config_from_gguf(*gguf::File::open(file));
  EXPECT_EQ(c.arch, Architecture::kQwen2);
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 1);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(c.rope.theta, 1e6);
  const ModelConfig q3 = config_from_gguf(*gguf::File::open(kFixtures / "qwen3" / "model.gguf"));
  EXPECT_TRUE(q3.qk_norm);
  EXPECT_TRUE(q3.tie_word_embeddings);
  EXPECT_EQ(q3.head_dim, 32);
}

// --- SmolLM2-135M-Instruct -------------------------------------------------------------------

class SmolLM2 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kSmolLM2)) GTEST_SKIP() << "SmolLM2 GGUF not installed at " << kSmolLM2 << " (scripts/setup.sh installs it)";
    if (!fs::exists(kFixtures / "smollm2" / "greedy.json"))
      GTEST_SKIP() << "no transformers references in " << kFixtures / "smollm2";
  }
};

TEST_F(SmolLM2, ConfigAndTypes) {
  const auto model = Model::load(kSmolLM2, LoadOptions{DType::kBF16, 0});
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.arch, Architecture::kLlama);
  EXPECT_EQ(c.num_layers, 30);
  EXPECT_EQ(c.num_heads, 9);
  EXPECT_EQ(c.num_kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.hidden_size, 576);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(model->stored_dtypes(), "F32,Q4_1,Q8_0");
  int tensors = 0;
  for (const StoredType& t : model->stored_types()) tensors += t.tensors;
  EXPECT_EQ(tensors, 30 * 9 + 2);  // no output.weight: tied
  EXPECT_EQ(model->parameter_count(), 134515008);
}

TEST_F(SmolLM2, Fp32LogitsMatchTransformersPrefillAndDecode) {
  const json g = read_json(kFixtures / "smollm2" / "greedy.json");
  auto ids = g.at("ids").get<std::vector<std::int32_t>>();
  const auto prompt = g.at("prompt").get<std::size_t>();
  const auto greedy = g.at("greedy").get<std::vector<std::int32_t>>();
  ASSERT_GE(prompt, 16u);
  ids.insert(ids.end(), greedy.begin(), greedy.begin() + 8);
  const auto model = Model::load(kSmolLM2, LoadOptions{DType::kF32, 0});
  Decoder decoder(model);
  const at::Tensor ours = prefill_then_decode(decoder, ids, prompt);
  const at::Tensor ref = reference(kFixtures / "smollm2" / "logits.npy");
  ASSERT_EQ(ours.sizes(), ref.sizes());
  const double err = (ours - ref).abs().max().item<double>();
  EXPECT_LE(err, 1e-4) << "max |logit| " << ref.abs().max().item<double>();
}

TEST_F(SmolLM2, GreedyMatchesTransformers) {
  const json g = read_json(kFixtures / "smollm2" / "greedy.json");
  const auto ids = g.at("ids").get<std::vector<std::int32_t>>();
  const auto greedy = g.at("greedy").get<std::vector<std::int32_t>>();
  ASSERT_EQ(greedy.size(), 32u);
  const auto model = Model::load(kSmolLM2, LoadOptions{DType::kF32, 0});
  Decoder decoder(model);
  std::vector<std::int32_t> ours;
  at::Tensor logits = decoder.prefill(ids, false);
  for (int i = 0; i < 32; ++i) {
    ours.push_back(static_cast<std::int32_t>(logits.argmax().item<std::int64_t>()));
    if (i + 1 < 32) logits = decoder.decode(ours.back());
  }
  EXPECT_EQ(ours, greedy);
}

// The reference is transformers' tokenizer built from this GGUF (vocab, merges, added tokens,
// unknown-byte handling), with one correction: its GGUF converter ignores tokenizer.ggml.pre and
// always applies the plain GPT-2 split, while this file says "smollm" (digits split one by one
// first, as SmolLM2's own tokenizer.json and llama.cpp do). So "ids" uses that pre-tokenizer;
// "ids_unmodified" is transformers' tokenizer as it comes, which we must equal on every string
// without a number.
TEST_F(SmolLM2, TokenizerMatchesTransformersGgufTokenizer) {
  const json cases = read_json(kFixtures / "smollm2" / "tokens.json");
  ASSERT_GE(cases.size(), 300u);
  const Tokenizer tokenizer = Tokenizer::load(kSmolLM2);
  EXPECT_EQ(tokenizer.vocab_size(), 49152);
  std::size_t mismatches = 0, unmodified_compared = 0;
  for (const json& c : cases) {
    const std::string text = c.at("text").get<std::string>();
    const auto ids = tokenizer.encode(text);
    if (ids != c.at("ids").get<std::vector<std::int32_t>>() && ++mismatches <= 5)
      ADD_FAILURE() << "text " << json(text).dump() << " ids differ";
    if (!c.at("has_number").get<bool>()) {
      ++unmodified_compared;
      EXPECT_EQ(ids, c.at("ids_unmodified").get<std::vector<std::int32_t>>()) << json(text).dump();
    }
    EXPECT_EQ(tokenizer.decode(ids), c.at("decoded").get<std::string>()) << json(text).dump();
  }
  EXPECT_EQ(mismatches, 0u) << "of " << cases.size();
  EXPECT_GE(unmodified_compared, 100u);
}

TEST_F(SmolLM2, ChatTemplateDefaultSystemPrompt) {
  const Tokenizer tokenizer = Tokenizer::load(kSmolLM2);
  const auto system = default_system_prompt(tokenizer.config());
  ASSERT_TRUE(system.has_value());
  EXPECT_EQ(*system, "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  ChatOptions options;
  options.default_system = system;
  EXPECT_EQ(format_chatml({{"user", "Hi"}}, options, is_hybrid_thinking(tokenizer.config())),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // A conversation that brings its own system message keeps it.
  EXPECT_EQ(format_chatml({{"system", "Be brief."}, {"user", "Hi"}}, options, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(tokenizer.config().eos_token, "<|im_end|>");
  EXPECT_FALSE(tokenizer.config().add_bos_token);
}

// --- model-level bad input -------------------------------------------------------------------

fs::path write(const std::string& name, const std::vector<std::uint8_t>& bytes) {
  const fs::path dir = fs::path(LUKA_TEST_WORK) / "gguf-bad";
  fs::create_directories(dir);
  const fs::path p = dir / name;
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return p;
}

std::string load_error(const fs::path& p) {
  try {
    Model::load(p, LoadOptions{});
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// A minimal llama header: one layer, 1 head.
gguf::testing::Builder llama_header(std::uint32_t hidden = 32) {
  gguf::testing::Builder b;
  b.kv_string("general.architecture", "llama")
      .kv_u32("llama.block_count", 1)
      .kv_u32("llama.context_length", 64)
      .kv_u32("llama.embedding_length", hidden)
      .kv_u32("llama.feed_forward_length", 64)
      .kv_u32("llama.attention.head_count", 1)
      .kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  return b;
}

TEST(GgufModel, BadInputs) {
  // Metadata with a wrong type.
  auto wrong_type = gguf::testing::Builder()
                        .kv_string("general.architecture", "llama")
                        .kv_u32("llama.embedding_length", 32)
                        .kv_u32("llama.feed_forward_length", 64)
                        .kv_string("llama.block_count", "thirty")
                        .bytes();
  EXPECT_NE(load_error(write("wrong-type.gguf", wrong_type)).find("'llama.block_count' has type string, expected an integer"),
            std::string::npos);
  // An architecture we do not run.
  auto arch = gguf::testing::Builder().kv_string("general.architecture", "gemma2").bytes();
  EXPECT_NE(load_error(write("arch.gguf", arch)).find("unsupported general.architecture 'gemma2'"), std::string::npos);
  // A tensor of a known but unsupported quantization (Q5_K), and a missing tensor.
  auto b = llama_header(256);
  b.tensor("token_embd.weight", {256, 10}, 13, std::vector<std::uint8_t>(176 * 10));
  const std::string q5k = load_error(write("q5k.gguf", b.bytes()));
  EXPECT_NE(q5k.find("tensor 'token_embd.weight' has type Q5_K, which is not supported"), std::string::npos) << q5k;
  auto c = llama_header();
  c.tensor("token_embd.weight", {32, 10}, 0, std::vector<std::uint8_t>(32 * 10 * 4));
  const std::string missing = load_error(write("missing.gguf", c.bytes()));
  EXPECT_NE(missing.find("missing tensor 'blk.0.attn_norm.weight'"), std::string::npos) << missing;
  // A tensor of the wrong shape.
  auto d = llama_header();
  d.tensor("token_embd.weight", {32, 10}, 0, std::vector<std::uint8_t>(32 * 10 * 4));
  d.tensor("blk.0.attn_norm.weight", {31}, 0, std::vector<std::uint8_t>(31 * 4));
  const std::string shape = load_error(write("shape.gguf", d.bytes()));
  EXPECT_NE(shape.find("'blk.0.attn_norm.weight' has dims [31], expected [32]"), std::string::npos) << shape;
  // Not a GGUF and not a folder.
  const fs::path text = write("notes.txt", {'h', 'i'});
  EXPECT_NE(load_error(text).find("neither a checkpoint folder nor a GGUF file"), std::string::npos);
}

}  // namespace
}  // namespace luka
