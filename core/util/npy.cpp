#include "core/util/npy.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "core/util/error.h"
#include "core/util/text_file.h"
#include "core/util/output_file.h"

namespace luka {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

}  // namespace

void write_npy_f32(const std::filesystem::path& path, const float* data,
                   const std::vector<std::int64_t>& shape) {
  std::ostringstream dict;
  dict << "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  std::int64_t count = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    dict << shape[i] << (shape.size() == 1 ? "," : (i + 1 < shape.size() ? ", " : ""));
    count *= shape[i];
  }
  dict << "), }";
  std::string header = dict.str();
  // magic(6) + version(2) + header_len(2) + header, padded with spaces to a multiple of 64, ending in '\n'.
  const std::size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');

  AtomicOutput file(path);  // a failed write leaves no partial .npy
  std::ofstream out(file.path(), std::ios::binary);
  if (!out) fail(path.string(), std::string("cannot open for writing: ") + std::strerror(errno));
  out.write(kMagic, 6);
  const char version[2] = {1, 0};
  out.write(version, 2);
  const std::uint16_t len = static_cast<std::uint16_t>(header.size());
  const char len_le[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  out.write(len_le, 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(count * sizeof(float)));
  out.close();
  if (!out) fail(path.string(), "write failed (disk full?)");
  file.commit();
}

NpyArray read_npy_f32(const std::filesystem::path& path) {
  require_regular_file(path, "");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path.string(), "cannot open");
  char magic[6];
  unsigned char version[2];
  in.read(magic, 6);
  in.read(reinterpret_cast<char*>(version), 2);
  if (!in || std::memcmp(magic, kMagic, 6) != 0) fail(path.string(), "not a .npy file");
  std::size_t header_len = 0;
  if (version[0] == 1) {
    unsigned char b[2];
    in.read(reinterpret_cast<char*>(b), 2);
    header_len = b[0] | (b[1] << 8);
  } else if (version[0] == 2 || version[0] == 3) {
    unsigned char b[4];
    in.read(reinterpret_cast<char*>(b), 4);
    header_len = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<std::size_t>(b[3]) << 24);
  } else {
    fail(path.string(), "unsupported .npy version " + std::to_string(version[0]));
  }
  std::string header(header_len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  if (!in) fail(path.string(), "truncated .npy header");
  if (header.find("'descr': '<f4'") == std::string::npos)
    fail(path.string(), "expected float32 ('<f4') data");
  if (header.find("'fortran_order': False") == std::string::npos)
    fail(path.string(), "expected C-order data");
  const auto open = header.find('(');
  const auto close = header.find(')', open);
  if (open == std::string::npos || close == std::string::npos) fail(path.string(), "no shape in .npy header");
  NpyArray arr;
  std::int64_t count = 1;
  std::istringstream dims(header.substr(open + 1, close - open - 1));
  std::string tok;
  while (std::getline(dims, tok, ',')) {
    if (tok.find_first_not_of(" ") == std::string::npos) continue;
    arr.shape.push_back(std::stoll(tok));
    count *= arr.shape.back();
  }
  arr.data.resize(static_cast<std::size_t>(count));
  in.read(reinterpret_cast<char*>(arr.data.data()), static_cast<std::streamsize>(count * sizeof(float)));
  if (!in) fail(path.string(), "truncated .npy data");
  return arr;
}

}  // namespace luka
