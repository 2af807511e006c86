#include "captures/writer.h"

#include "core/util/output_file.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "core/util/error.h"

namespace luka::capture {
namespace {

constexpr hsize_t kUnlimited = H5S_UNLIMITED;
constexpr std::int64_t kGrowSteps = 64;     // step axes grow ahead by this many steps
constexpr std::int64_t kGrowTokens = 4096;  // token lists by this many tokens (piece bytes: 4x)

std::int64_t round_up(std::int64_t v, std::int64_t m) { return (v + m - 1) / m * m; }

}  // namespace

CaptureWriter::CaptureWriter(std::filesystem::path path) : path_(std::move(path)), name_(path_.string()) {
  // A link at the path keeps pointing where it did: the capture replaces the file it names.
  std::error_code ec;
  target_ = std::filesystem::is_symlink(std::filesystem::symlink_status(path_, ec)) ? std::filesystem::weakly_canonical(path_, ec) : path_;
  if (ec || target_.empty()) target_ = path_;
  partial_ = target_;
  partial_ += ".partial";
}

CaptureWriter::~CaptureWriter() {
  std::lock_guard<std::recursive_mutex> lock(h5::lock());
  if (file_.valid() && !finished_) {
    // The run failed (a write error, a full disk) or was abandoned: leave the file as a killed
    // run leaves it. Closing it would rewrite the superblock without its writer flags, and
    // HDF5 then refuses a file whose last writes failed as truncated; left so, readers open it
    // up to its last complete step.
    for_each_handle([](h5::Handle& h) { h.release(); });
    file_.release();
    return;
  }
  close_datasets();
  file_.reset();
}

template <typename F>
void CaptureWriter::for_each_handle(F&& f) {
  for (LayerSets& sets : layers_) {
    for (h5::Handle* h : {&sets.page_start, &sets.page_end, &sets.page_created, &sets.page_raw, &sets.page_member_end, &sets.page_members}) f(*h);
    for (h5::Handle& h : sets.levels) f(h);
  }
  for (h5::Handle* h : {&tok_id_, &tok_generated_, &tok_segment_, &tok_prob_, &tok_piece_end_, &tok_piece_bytes_, &step_tokens_, &complete_,
                        &mode_, &paged_end_, &seconds_, &cover_size_, &fidelity_, &kascade_source_, &kascade_head_, &effective_, &dense_, &cover_, &page_state_, &summary_mass_})
    f(*h);
}

void CaptureWriter::close_datasets() {
  for_each_handle([](h5::Handle& h) { h.reset(); });
  layers_.clear();
}

void CaptureWriter::begin(const Manifest& m, const Layout& layout, const std::vector<Token>& prompt,
                          const std::vector<Segment>& segments) {
  std::lock_guard<std::recursive_mutex> lock(h5::lock());
  layout_ = layout;
  h5::Handle fapl(h5::check(H5Pcreate(H5P_FILE_ACCESS), name_, "file properties"));
  h5::check_status(H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST), name_, "file format");
  // Written beside the target and renamed over it when finished, so a reader that has the old
  // capture open (a replay in the Studio) keeps reading it. A .partial file left by a killed run
  // is replaced: the lock says no other run writes it.
  lock_ = std::make_unique<OutputLock>(target_);
  std::error_code ec;
  std::filesystem::remove(partial_, ec);
  const std::string partial = partial_.string();
  file_ = h5::Handle(h5::check(H5Fcreate(partial.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl), name_, "cannot create the capture file"));
  created_partial_ = true;

  h5::write_attr(file_, schema::kFormatAttr, std::string(kFormatName), name_);
  h5::write_attr(file_, schema::kVersionAttr, std::int64_t{kFormatVersion}, name_);

  {
    h5::Handle g = h5::create_group(file_, schema::kManifest, name_);
    for (const ManifestString& s : kManifestStrings)
      if (!s.optional || !(m.*s.field).empty()) h5::write_attr(g, s.name, m.*s.field, name_);
    h5::write_attr(g, schema::kSeedAttr, m.seed, name_);
  }
  {
    h5::Handle g = h5::create_group(file_, schema::kLayout, name_);
    h5::write_attr(g, schema::kNumLayersAttr, std::int64_t{layout.num_layers}, name_);
    h5::write_attr(g, schema::kNumHeadsAttr, std::int64_t{layout.num_heads}, name_);
    h5::write_attr(g, schema::kNumKvHeadsAttr, std::int64_t{layout.num_kv_heads}, name_);
    h5::write_attr(g, schema::kLayersAttr, std::vector<std::int64_t>(layout.layers.begin(), layout.layers.end()), name_);
    h5::write_attr(g, schema::kHeadsAttr, std::vector<std::int64_t>(layout.heads.begin(), layout.heads.end()), name_);
    h5::write_attr(g, schema::kPageSizeAttr, layout.page_size, name_);
    h5::write_attr(g, schema::kPromptTokensAttr, layout.prompt_tokens, name_);
    h5::write_attr(g, schema::kLevelsAttr, std::vector<std::int64_t>(layout.levels.begin(), layout.levels.end()), name_);
    h5::write_attr(g, schema::kRowsAttr, std::int64_t{layout.rows}, name_);
    h5::write_attr(g, schema::kCoversAttr, std::int64_t{layout.covers}, name_);
    h5::write_attr(g, schema::kDeflateAttr, std::int64_t{layout.deflate}, name_);
  }
  {
    h5::Handle g = h5::create_group(file_, schema::kSegments, name_);
    std::vector<std::string> labels, colours;
    std::vector<std::int64_t> b, e;
    for (const Segment& s : segments) {
      labels.push_back(s.label);
      colours.push_back(s.colour);
      b.push_back(s.begin);
      e.push_back(s.end);
    }
    h5::write_strings(g, schema::kSegmentLabel.name, labels, name_);
    h5::write_strings(g, schema::kSegmentColour.name, colours, name_);
    const hsize_t n = segments.size();
    for (const auto& [key, v] : {std::pair{&schema::kSegmentBegin, &b}, {&schema::kSegmentEnd, &e}}) {
      h5::Handle ds = h5::create_dataset(g, key->name, h5::stored_type(key->type), {{n}, {n}, {}, -1}, name_);
      h5::write(ds, H5T_NATIVE_INT64, {0}, {n}, v->data(), name_);
    }
  }
  const int deflate = layout.deflate;
  // Token lists, per-step scalars and page tables are small and rewritten at every step (a step
  // appends to a chunk already on disk): without filters such a chunk is rewritten in place,
  // where a compressed one would be recompressed and moved at every flush.
  const int plain = -1;
  {
    h5::Handle g = h5::create_group(file_, schema::kTokens, name_);
    tok_id_ = h5::create_dataset(g, schema::kTokenId.name, h5::stored_type(schema::kTokenId.type), {{0}, {kUnlimited}, {4096}, plain}, name_);
    tok_generated_ = h5::create_dataset(g, schema::kTokenGenerated.name, h5::stored_type(schema::kTokenGenerated.type), {{0}, {kUnlimited}, {4096}, plain}, name_);
    tok_segment_ = h5::create_dataset(g, schema::kTokenSegment.name, h5::stored_type(schema::kTokenSegment.type), {{0}, {kUnlimited}, {4096}, plain}, name_);
    tok_prob_ = h5::create_dataset(g, schema::kTokenProb.name, h5::stored_type(schema::kTokenProb.type), {{0}, {kUnlimited}, {4096}, plain}, name_);
    tok_piece_end_ = h5::create_dataset(g, schema::kTokenPieceEnd.name, h5::stored_type(schema::kTokenPieceEnd.type), {{0}, {kUnlimited}, {4096}, plain}, name_);
    tok_piece_bytes_ = h5::create_dataset(g, schema::kTokenPieceBytes.name, h5::stored_type(schema::kTokenPieceBytes.type), {{0}, {kUnlimited}, {16384}, plain}, name_);
  }
  const hsize_t H = layout.heads.size();
  h5::Handle prefill = h5::create_group(file_, schema::kPrefill, name_);
  h5::Handle decode = h5::create_group(file_, schema::kDecode, name_);
  h5::Handle pages = h5::create_group(file_, schema::kPages, name_);
  step_tokens_ = h5::create_dataset(decode, schema::kStepTokens.name, h5::stored_type(schema::kStepTokens.type), {{0}, {kUnlimited}, {64}, plain}, name_);
  complete_ = h5::create_dataset(file_, schema::kCompleteSteps.name, h5::stored_type(schema::kCompleteSteps.type), {{1}, {1}, {}, -1}, name_);
  const std::int64_t zero = 0;
  h5::write(complete_, H5T_NATIVE_INT64, {0}, {1}, &zero, name_);

  const hsize_t L = layout.layers.size();
  mode_ = h5::create_dataset(decode, schema::kStepMode.name, h5::stored_type(schema::kStepMode.type), {{0, L}, {kUnlimited, L}, {64, L}, plain}, name_);
  paged_end_ = h5::create_dataset(decode, schema::kStepPagedEnd.name, h5::stored_type(schema::kStepPagedEnd.type), {{0, L}, {kUnlimited, L}, {64, L}, plain}, name_);
  seconds_ = h5::create_dataset(decode, schema::kStepSeconds.name, h5::stored_type(schema::kStepSeconds.type), {{0, L}, {kUnlimited, L}, {64, L}, plain}, name_);
  cover_size_ = h5::create_dataset(decode, schema::kStepCoverSize.name, h5::stored_type(schema::kStepCoverSize.type), {{0, L, H}, {kUnlimited, L, H}, {16, L, H}, plain}, name_);
  fidelity_ = h5::create_dataset(decode, schema::kStepFidelity.name, h5::stored_type(schema::kStepFidelity.type), {{0, L, H, 4}, {kUnlimited, L, H, 4}, {16, L, H, 4}, plain}, name_);
  kascade_source_ = h5::create_dataset(decode, schema::kStepKascadeSource.name, h5::stored_type(schema::kStepKascadeSource.type), {{0, L}, {kUnlimited, L}, {64, L}, plain}, name_);
  kascade_head_ = h5::create_dataset(decode, schema::kStepKascadeHead.name, h5::stored_type(schema::kStepKascadeHead.type), {{0, L, H}, {kUnlimited, L, H}, {16, L, H}, plain}, name_);
  const hsize_t ct = static_cast<hsize_t>(token_chunk(layout)), cp = static_cast<hsize_t>(kPageChunk);
  const hsize_t Lc = static_cast<hsize_t>(layer_chunk(layout));
  const std::vector<hsize_t> rows0{0, L, H, 0}, rows_max{kUnlimited, L, H, kUnlimited}, token_rows{1, Lc, H, ct}, page_rows{1, Lc, H, cp};
  if (layout.rows) {
    effective_ = h5::create_dataset(decode, schema::kStepEffective.name, h5::stored_type(schema::kStepEffective.type), {rows0, rows_max, token_rows, deflate}, name_);
    // Written at steps where the dense shadow ran; other steps' chunks are never written.
    dense_ = h5::create_dataset(decode, schema::kStepDense.name, h5::stored_type(schema::kStepDense.type), {rows0, rows_max, token_rows, deflate}, name_);
  }
  if (layout.covers) {
    cover_ = h5::create_dataset(decode, schema::kStepCover.name, h5::stored_type(schema::kStepCover.type), {rows0, rows_max, token_rows, deflate}, name_);
    page_state_ = h5::create_dataset(decode, schema::kStepPageState.name, h5::stored_type(schema::kStepPageState.type), {rows0, rows_max, page_rows, deflate}, name_);
    summary_mass_ = h5::create_dataset(decode, schema::kStepSummaryMass.name, h5::stored_type(schema::kStepSummaryMass.type), {rows0, rows_max, page_rows, deflate}, name_);
  }
  layers_.resize(layout.layers.size());
  for (std::size_t i = 0; i < layout.layers.size(); ++i) {
    const std::string lg = schema::layer_name(layout.layers[i]);
    LayerSets& ls = layers_[i];
    if (!layout.levels.empty()) {
      h5::Handle g = h5::create_group(prefill, lg, name_);
      for (const int level : layout.levels) {
        const hsize_t s = static_cast<hsize_t>(level_size(layout.prompt_tokens, level));
        const hsize_t c = static_cast<hsize_t>(map_chunk(layout, static_cast<int>(i), level));
        ls.levels.push_back(h5::create_dataset(g, schema::kPrefillLevel.name + std::to_string(level), h5::stored_type(schema::kPrefillLevel.type),
                                               {{H, s, s}, {H, s, s}, {1, c, c}, deflate}, name_));
      }
    }
    h5::Handle pg = h5::create_group(pages, lg, name_);
    ls.page_start = h5::create_dataset(pg, schema::kPageStart.name, h5::stored_type(schema::kPageStart.type), {{0}, {kUnlimited}, {static_cast<hsize_t>(kPageTableChunk)}, plain}, name_);
    ls.page_end = h5::create_dataset(pg, schema::kPageEnd.name, h5::stored_type(schema::kPageEnd.type), {{0}, {kUnlimited}, {static_cast<hsize_t>(kPageTableChunk)}, plain}, name_);
    ls.page_created = h5::create_dataset(pg, schema::kPageCreated.name, h5::stored_type(schema::kPageCreated.type), {{0}, {kUnlimited}, {static_cast<hsize_t>(kPageTableChunk)}, plain}, name_);
    ls.page_raw = h5::create_dataset(pg, schema::kPageRaw.name, h5::stored_type(schema::kPageRaw.type), {{0}, {kUnlimited}, {static_cast<hsize_t>(kPageTableChunk)}, plain}, name_);
    ls.page_member_end = h5::create_dataset(pg, schema::kPageMemberEnd.name, h5::stored_type(schema::kPageMemberEnd.type), {{0}, {kUnlimited}, {static_cast<hsize_t>(kPageTableChunk)}, plain}, name_);
    ls.page_members = h5::create_dataset(pg, schema::kPageMembers.name, h5::stored_type(schema::kPageMembers.type), {{0}, {kUnlimited}, {static_cast<hsize_t>(kPageTableChunk)}, plain}, name_);
  }
  append_tokens(prompt);
  // From here on only appends: SWMR keeps the file consistent on disk between flushes.
  h5::check_status(H5Fstart_swmr_write(file_), name_, "cannot start single-writer mode");
  flush();
}

void CaptureWriter::flush() { h5::check_status(H5Fflush(file_, H5F_SCOPE_LOCAL), name_, "flush failed (disk full?)"); }

void CaptureWriter::append_tokens(const std::vector<Token>& tokens) {
  if (tokens.empty()) return;
  const hsize_t n0 = static_cast<hsize_t>(tokens_), n = tokens.size();
  std::vector<std::int32_t> ids, seg;
  std::vector<float> prob;
  std::vector<std::uint8_t> gen, bytes;
  std::vector<std::int64_t> ends;
  std::int64_t end = piece_bytes_;
  for (const Token& t : tokens) {
    ids.push_back(t.id);
    seg.push_back(t.segment);
    prob.push_back(t.prob);
    gen.push_back(t.generated ? 1 : 0);
    bytes.insert(bytes.end(), t.piece.begin(), t.piece.end());
    end += static_cast<std::int64_t>(t.piece.size());
    ends.push_back(end);
  }
  // Token and byte axes grow ahead in blocks (each extent change rewrites metadata at the next
  // flush); finish() trims them. Readers stop at the last complete step.
  if (static_cast<std::int64_t>(n0 + n) > token_cap_) {
    token_cap_ = round_up(static_cast<std::int64_t>(n0 + n), kGrowTokens);
    for (hid_t ds : {tok_id_.get(), tok_generated_.get(), tok_segment_.get(), tok_prob_.get(), tok_piece_end_.get()})
      h5::set_extent(ds, {static_cast<hsize_t>(token_cap_)}, name_);
  }
  h5::write(tok_prob_, H5T_NATIVE_FLOAT, {n0}, {n}, prob.data(), name_);
  h5::write(tok_id_, H5T_NATIVE_INT32, {n0}, {n}, ids.data(), name_);
  h5::write(tok_generated_, H5T_NATIVE_UINT8, {n0}, {n}, gen.data(), name_);
  h5::write(tok_segment_, H5T_NATIVE_INT32, {n0}, {n}, seg.data(), name_);
  h5::write(tok_piece_end_, H5T_NATIVE_INT64, {n0}, {n}, ends.data(), name_);
  if (!bytes.empty()) {
    if (end > piece_cap_) {
      piece_cap_ = round_up(end, 4 * kGrowTokens);
      h5::set_extent(tok_piece_bytes_, {static_cast<hsize_t>(piece_cap_)}, name_);
    }
    h5::write(tok_piece_bytes_, H5T_NATIVE_UINT8, {static_cast<hsize_t>(piece_bytes_)}, {bytes.size()}, bytes.data(), name_);
  }
  tokens_ += static_cast<std::int64_t>(n);
  piece_bytes_ = end;
}

void CaptureWriter::map_rows(const MapRows& r, const MapChunks* chunks) {
  std::lock_guard<std::recursive_mutex> lock(h5::lock());
  const int i = recorded_index(layout_.layers, r.layer, "layer");
  const auto it = std::find(layout_.levels.begin(), layout_.levels.end(), r.level);
  if (it == layout_.levels.end()) fail(name_, "map level " + std::to_string(r.level) + " is not stored");
  const hid_t ds = layers_[i].levels[static_cast<std::size_t>(it - layout_.levels.begin())];
  const hsize_t H = layout_.heads.size();
  if (!chunks) {
    h5::write(ds, h5::half_type(), {0, static_cast<hsize_t>(r.row0), 0}, {H, static_cast<hsize_t>(r.rows), static_cast<hsize_t>(r.cols)},
              r.data.data(), name_);
    return;
  }
  // Encoded chunks, written as they are (compressed on the producer's threads).
  const std::int64_t c = map_chunk(layout_, i, r.level);
  const std::size_t per_head = static_cast<std::size_t>((r.cols + c - 1) / c);
  if (chunks->chunk != c || r.row0 % c != 0 || chunks->tiles.size() != H * per_head) fail(name_, "map chunks do not match the dataset's chunking");
  for (hsize_t h = 0; h < H; ++h)
    for (std::size_t j = 0; j < per_head; ++j) {
      const auto& bytes = chunks->tiles[h * per_head + j];
      const hsize_t offset[3] = {h, static_cast<hsize_t>(r.row0), static_cast<hsize_t>(j) * static_cast<hsize_t>(c)};
      h5::check_status(H5Dwrite_chunk(ds, H5P_DEFAULT, 0, offset, bytes.size(), bytes.data()), name_, "cannot write a map chunk");
    }
}

void CaptureWriter::end_prefill() {
  std::lock_guard<std::recursive_mutex> lock(h5::lock());
  flush();
}

void CaptureWriter::step(const Step& s, const StepChunks* chunks) {
  std::lock_guard<std::recursive_mutex> lock(h5::lock());
  if (s.step != complete_steps_ + 1) fail(name_, "decode steps out of order");
  if (s.layers.size() != layers_.size()) fail(name_, "a step record without every recorded layer");
  append_tokens(s.new_tokens);
  const hsize_t si = static_cast<hsize_t>(complete_steps_), L = layers_.size(), H = layout_.heads.size(), T = static_cast<hsize_t>(s.tokens);
  // Step axes grow ahead in blocks, token and page axes in whole chunks: few extent changes, so a
  // step's flush rewrites little metadata. finish() trims the step axes to the steps written.
  const bool more_steps = static_cast<std::int64_t>(si) + 1 > step_cap_;
  if (more_steps) step_cap_ = round_up(static_cast<std::int64_t>(si) + 1, kGrowSteps);
  const hsize_t S = static_cast<hsize_t>(step_cap_);
  if (more_steps) {
    h5::set_extent(step_tokens_, {S}, name_);
    for (hid_t ds : {mode_.get(), paged_end_.get(), seconds_.get(), kascade_source_.get()}) h5::set_extent(ds, {S, L}, name_);
    h5::set_extent(cover_size_, {S, L, H}, name_);
    h5::set_extent(kascade_head_, {S, L, H}, name_);
    h5::set_extent(fidelity_, {S, L, H, 4}, name_);
  }
  h5::write(step_tokens_, H5T_NATIVE_INT64, {si}, {1}, &s.tokens, name_);

  // The per-layer scalars and metrics of the step, one write per quantity.
  std::vector<std::int8_t> mode(L);
  std::vector<std::int64_t> paged_end(L);
  std::vector<double> seconds(L);
  std::vector<std::int32_t> cover_size(L * H);
  std::vector<float> fidelity(L * H * 4);
  std::vector<std::int32_t> kascade_source(L), kascade_head(L * H, -1);
  hsize_t P = 0;  // the most pages of any layer
  for (std::size_t i = 0; i < L; ++i) {
    const LayerStep& ls = s.layers[i];
    if (ls.cover_size.size() != H || ls.fidelity.size() != H * 4) fail(name_, "a step record with the wrong number of heads");
    mode[i] = ls.mode;
    paged_end[i] = ls.paged_end;
    seconds[i] = ls.seconds;
    std::copy(ls.cover_size.begin(), ls.cover_size.end(), cover_size.begin() + static_cast<std::ptrdiff_t>(i * H));
    std::copy(ls.fidelity.begin(), ls.fidelity.end(), fidelity.begin() + static_cast<std::ptrdiff_t>(i * H * 4));
    kascade_source[i] = ls.kascade_source;
    if (!ls.kascade_head.empty()) {
      if (ls.kascade_head.size() != H) fail(name_, "a step record with the wrong number of heads");
      std::copy(ls.kascade_head.begin(), ls.kascade_head.end(), kascade_head.begin() + static_cast<std::ptrdiff_t>(i * H));
    }
    P = std::max<hsize_t>(P, ls.page_state.size() / std::max<hsize_t>(H, 1));
  }
  h5::write(mode_, H5T_NATIVE_INT8, {si, 0}, {1, L}, mode.data(), name_);
  h5::write(paged_end_, H5T_NATIVE_INT64, {si, 0}, {1, L}, paged_end.data(), name_);
  h5::write(seconds_, H5T_NATIVE_DOUBLE, {si, 0}, {1, L}, seconds.data(), name_);
  h5::write(cover_size_, H5T_NATIVE_INT32, {si, 0, 0}, {1, L, H}, cover_size.data(), name_);
  h5::write(fidelity_, H5T_NATIVE_FLOAT, {si, 0, 0, 0}, {1, L, H, 4}, fidelity.data(), name_);
  h5::write(kascade_source_, H5T_NATIVE_INT32, {si, 0}, {1, L}, kascade_source.data(), name_);
  h5::write(kascade_head_, H5T_NATIVE_INT32, {si, 0, 0}, {1, L, H}, kascade_head.data(), name_);

  const std::int64_t ct = token_chunk(layout_);
  const bool more_tokens = more_steps || s.tokens > token_extent_;
  if (s.tokens > token_extent_) token_extent_ = round_up(s.tokens, ct);
  const bool more_pages = more_steps || static_cast<std::int64_t>(P) > page_extent_;
  if (static_cast<std::int64_t>(P) > page_extent_) page_extent_ = round_up(static_cast<std::int64_t>(P), kPageChunk);
  const hsize_t TE = static_cast<hsize_t>(token_extent_), PE = static_cast<hsize_t>(page_extent_);
  if (more_tokens)
    for (hid_t ds : {effective_.get(), dense_.get(), cover_.get()})
      if (ds >= 0) h5::set_extent(ds, {S, L, H, TE}, name_);
  if (more_pages)
    for (hid_t ds : {page_state_.get(), summary_mass_.get()})
      if (ds >= 0) h5::set_extent(ds, {S, L, H, PE}, name_);

  if (chunks) {  // a few chunks per part, each spanning a group of layers
    const StepChunks& c = *chunks;
    if (layout_.rows) {
      write_chunks(effective_, si, ct, c.token_chunks, c.effective);
      write_chunks(dense_, si, ct, c.token_chunks, c.dense);
    }
    if (layout_.covers) {
      write_chunks(cover_, si, ct, c.token_chunks, c.cover);
      write_chunks(page_state_, si, kPageChunk, c.page_chunks, c.page_state);
      write_chunks(summary_mass_, si, kPageChunk, c.page_chunks, c.summary_mass);
    }
  }
  const bool plain = !chunks;  // a sink fed without chunks: each layer's rows through HDF5's filters
  for (std::size_t i = 0; i < L; ++i) {
    const LayerStep& ls = s.layers[i];
    const hsize_t li = i;
    if (layout_.rows && plain) {
      h5::write(effective_, h5::half_type(), {si, li, 0, 0}, {1, 1, H, T}, ls.effective.data(), name_);
      if (!ls.dense.empty()) h5::write(dense_, h5::half_type(), {si, li, 0, 0}, {1, 1, H, T}, ls.dense.data(), name_);
    }
    if (layout_.covers && plain) {
      const hsize_t Pi = ls.page_state.size() / std::max<hsize_t>(H, 1);
      h5::write(cover_, H5T_NATIVE_UINT8, {si, li, 0, 0}, {1, 1, H, T}, ls.cover.data(), name_);
      if (Pi) {
        h5::write(page_state_, H5T_NATIVE_UINT8, {si, li, 0, 0}, {1, 1, H, Pi}, ls.page_state.data(), name_);
        h5::write(summary_mass_, h5::half_type(), {si, li, 0, 0}, {1, 1, H, Pi}, ls.summary_mass.data(), name_);
      }
    }
    if (!ls.new_pages.empty()) {
      LayerSets& Ls = layers_[i];
      const hsize_t p0 = static_cast<hsize_t>(Ls.pages), np = ls.new_pages.size();
      std::vector<std::int64_t> a, b, c, member_end, members;
      std::vector<std::uint8_t> raw;
      for (const PageInfo& p : ls.new_pages) {
        a.push_back(p.start);
        b.push_back(p.end);
        c.push_back(p.created_step);
        raw.push_back(p.raw ? 1 : 0);
        members.insert(members.end(), p.members.begin(), p.members.end());
        member_end.push_back(Ls.members + static_cast<std::int64_t>(members.size()));
      }
      for (hid_t ds : {Ls.page_start.get(), Ls.page_end.get(), Ls.page_created.get(), Ls.page_raw.get(), Ls.page_member_end.get()})
        h5::set_extent(ds, {p0 + np}, name_);
      h5::write(Ls.page_start, H5T_NATIVE_INT64, {p0}, {np}, a.data(), name_);
      h5::write(Ls.page_end, H5T_NATIVE_INT64, {p0}, {np}, b.data(), name_);
      h5::write(Ls.page_created, H5T_NATIVE_INT64, {p0}, {np}, c.data(), name_);
      h5::write(Ls.page_raw, H5T_NATIVE_UINT8, {p0}, {np}, raw.data(), name_);
      h5::write(Ls.page_member_end, H5T_NATIVE_INT64, {p0}, {np}, member_end.data(), name_);
      if (!members.empty()) {
        const hsize_t m0 = static_cast<hsize_t>(Ls.members), nm = members.size();
        h5::set_extent(Ls.page_members, {m0 + nm}, name_);
        h5::write(Ls.page_members, H5T_NATIVE_INT64, {m0}, {nm}, members.data(), name_);
        Ls.members += static_cast<std::int64_t>(nm);
      }
      Ls.pages += static_cast<std::int64_t>(np);
    }
  }
  // The step's data reaches the disk before the counter that makes it visible.
  flush();
  ++complete_steps_;
  h5::write(complete_, H5T_NATIVE_INT64, {0}, {1}, &complete_steps_, name_);
  flush();
}

void CaptureWriter::write_chunks(hid_t dataset, hsize_t step, std::int64_t width, std::int64_t per_row,
                                 const std::vector<std::vector<std::uint8_t>>& chunks) {
  const hsize_t Lc = static_cast<hsize_t>(layer_chunk(layout_));
  if (per_row <= 0) return;
  if (chunks.size() % static_cast<std::size_t>(per_row) != 0 || chunks.size() / static_cast<std::size_t>(per_row) * Lc < layers_.size())
    fail(name_, "step chunks do not match the dataset's chunking");
  for (std::size_t j = 0; j < chunks.size(); ++j) {
    if (chunks[j].empty()) continue;  // no layer of the group has this part at this step
    const hsize_t g = j / static_cast<std::size_t>(per_row), k = j % static_cast<std::size_t>(per_row);
    const hsize_t offset[4] = {step, g * Lc, 0, k * static_cast<hsize_t>(width)};
    h5::check_status(H5Dwrite_chunk(dataset, H5P_DEFAULT, 0, offset, chunks[j].size(), chunks[j].data()), name_,
                     "cannot write a step chunk");
  }
}

void CaptureWriter::finish(const std::vector<Token>& trailing) {
  std::lock_guard<std::recursive_mutex> lock(h5::lock());
  if (finished_) return;
  append_tokens(trailing);
  // Trim the axes grown ahead to what was written.
  const hsize_t S = static_cast<hsize_t>(complete_steps_), L = layers_.size(), H = layout_.heads.size();
  h5::set_extent(step_tokens_, {S}, name_);
  for (hid_t ds : {mode_.get(), paged_end_.get(), seconds_.get(), kascade_source_.get()}) h5::set_extent(ds, {S, L}, name_);
  h5::set_extent(cover_size_, {S, L, H}, name_);
  h5::set_extent(kascade_head_, {S, L, H}, name_);
  h5::set_extent(fidelity_, {S, L, H, 4}, name_);
  for (hid_t ds : {effective_.get(), dense_.get(), cover_.get()})
    if (ds >= 0) h5::set_extent(ds, {S, L, H, static_cast<hsize_t>(token_extent_)}, name_);
  for (hid_t ds : {page_state_.get(), summary_mass_.get()})
    if (ds >= 0) h5::set_extent(ds, {S, L, H, static_cast<hsize_t>(page_extent_)}, name_);
  for (hid_t ds : {tok_id_.get(), tok_generated_.get(), tok_segment_.get(), tok_prob_.get(), tok_piece_end_.get()})
    h5::set_extent(ds, {static_cast<hsize_t>(tokens_)}, name_);
  h5::set_extent(tok_piece_bytes_, {static_cast<hsize_t>(piece_bytes_)}, name_);
  flush();
  close_datasets();
  file_.reset();
  // Out of single-writer mode: mark the run as finished.
  {
    const std::string partial = partial_.string();
    h5::Handle f(h5::check(H5Fopen(partial.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), name_, "cannot reopen the capture to finish it"));
    h5::write_attr(f, schema::kFinishedAttr, std::int64_t{1}, name_);
    h5::check_status(H5Fflush(f, H5F_SCOPE_LOCAL), name_, "flush failed (disk full?)");
  }
  std::error_code ec;
  std::filesystem::rename(partial_, target_, ec);
  if (ec) fail(name_, "cannot rename " + partial_.string() + " to the capture's name: " + ec.message());
  finished_ = true;
}

}  // namespace luka::capture
