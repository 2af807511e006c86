#include "viz/png.h"

#include <stb/stb_image.h>
#include <stb/stb_image_write.h>

#include <cstring>

#include "core/util/error.h"
#include "core/util/output_file.h"

namespace luka::viz {

void write_png(const Image& image, const std::filesystem::path& path) {
  if (image.width <= 0 || image.height <= 0 || image.rgba.size() != static_cast<std::size_t>(image.width) * image.height * 4)
    fail(path.string(), "cannot write an empty or malformed image");
  AtomicOutput file(path);
  if (!stbi_write_png(file.path().string().c_str(), image.width, image.height, 4, image.rgba.data(), image.width * 4))
    fail(path.string(), "cannot write the PNG file");
  file.commit();
}

Image read_png(const std::filesystem::path& path) {
  int w = 0, h = 0, channels = 0;
  unsigned char* data = stbi_load(path.string().c_str(), &w, &h, &channels, 4);
  if (!data) fail(path.string(), std::string("not a readable PNG (") + stbi_failure_reason() + ")");
  Image img;
  img.width = w;
  img.height = h;
  img.rgba.assign(data, data + static_cast<std::size_t>(w) * h * 4);
  stbi_image_free(data);
  return img;
}

}  // namespace luka::viz
