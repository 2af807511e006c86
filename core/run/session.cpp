#include "core/run/session.h"

#include "core/device/device.h"
#include "core/luka/luka_layer.h"
#include "core/model/attention.h"
#include "core/model/decoder.h"
#include "core/model/model.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/error.h"

namespace luka {

RunSession::RunSession(std::shared_ptr<const Backend> device, std::shared_ptr<const Model> model,
                       const Tokenizer* tokenizer)
    : device_(std::move(device)), model_(std::move(model)), tokenizer_(tokenizer) {
  if (!device_ || !model_) fail("run session", "a session needs a device and a model");
  decoder_ = std::make_unique<Decoder>(model_);
  use(std::nullopt);
}

RunSession::~RunSession() = default;

void RunSession::use(const std::optional<LukaConfig>& config) {
  // The old loop refers to the old layers: it goes first.
  loop_.reset();
  layers_.clear();
  if (config) {
    layers_ = device_->install_luka(*decoder_, *config);
    if (tokenizer_) set_token_texts(layers_, tokenizer_->all_token_bytes());
  } else if (config_) {
    // Back to plain attention: each layer's dense attention, as a new decoder has.
    for (int l = 0; l < model_->config().num_layers; ++l) decoder_->set_attention(l, std::make_shared<DenseAttention>());
  }
  config_ = config;
  loop_ = std::make_unique<RunLoop>(*decoder_, layers_, config.value_or(LukaConfig{}));
  const std::shared_ptr<const Backend> device = device_;
  loop_->set_sampler_factory([device](const SamplingParams& p) { return device->sampler(p); });
}

}  // namespace luka
