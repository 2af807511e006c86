#include "captures/heap_check.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <vector>

namespace luka::capture {
namespace {

constexpr std::size_t kCollectionHeader = 16;  // "GCOL", version, 3 reserved, collection size
constexpr std::size_t kObjectHeader = 16;      // index, reference count, 4 reserved, object size
constexpr std::size_t kMinCollection = 4096;   // HDF5 never makes a smaller one

std::uint64_t le(const std::uint8_t* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// A collection header: the signature, version 1 and zero reserved bytes (raw data that happens to
// hold "GCOL" almost never continues so).
bool is_collection_header(const std::uint8_t* p) {
  return std::memcmp(p, "GCOL", 4) == 0 && p[4] == 1 && p[5] == 0 && p[6] == 0 && p[7] == 0;
}

std::vector<std::uint8_t> read_bytes(std::ifstream& in, std::uint64_t offset, std::size_t n) {
  std::vector<std::uint8_t> bytes(n);
  in.clear();
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(n));
  bytes.resize(static_cast<std::size_t>(std::max<std::streamsize>(in.gcount(), 0)));
  return bytes;
}

// The superblock's size of lengths (versions 0-3, at byte 0; HDF5 also looks at 512, 1024, ...
// for files with a user block, which this check then skips), or 0 when it cannot tell.
int size_of_lengths(const std::vector<std::uint8_t>& head) {
  if (head.size() < 16 || std::memcmp(head.data(), "\x89HDF\r\n\x1a\n", 8) != 0) return 0;
  const int version = head[8];
  if (version == 0 || version == 1) return head[14];
  if (version == 2 || version == 3) return head[10];
  return 0;
}

// A collection's objects (index → size), or what is wrong with it.
struct Walk {
  std::map<std::uint64_t, std::uint64_t> objects;
  std::optional<std::string> damage;
};

Walk walk_collection(const std::uint8_t* data, std::size_t size) {
  Walk w;
  if (size < kMinCollection) {
    w.damage = "the collection is " + std::to_string(size) + " bytes (at least 4096)";
    return w;
  }
  std::size_t pos = kCollectionHeader;
  while (pos + kObjectHeader <= size) {
    const std::uint64_t index = le(data + pos, 2);
    const std::uint64_t object = le(data + pos + 8, 8);
    const std::size_t left = size - pos;
    if (index == 0) {
      // The free space: its size counts its own header. HDF5 writes it last, up to the collection's
      // end, but reads on from wherever its size says it ends, as this walk does: free space of 0
      // bytes would have HDF5 read the same header for ever.
      if (object == 0) {
        w.damage = "its free space at byte " + std::to_string(pos) + " claims 0 bytes (HDF5 would never read past it)";
        return w;
      }
      if (object > left) {
        w.damage = "its free space claims " + std::to_string(object) + " bytes, " + std::to_string(left) + " are left in the collection";
        return w;
      }
      pos += static_cast<std::size_t>(object);
      continue;
    }
    if (object > left - kObjectHeader) {
      w.damage = "object " + std::to_string(index) + " claims " + std::to_string(object) + " bytes, " +
                 std::to_string(left - kObjectHeader) + " are left in the collection";
      return w;
    }
    if (!w.objects.emplace(index, object).second) {
      w.damage = "object " + std::to_string(index) + " appears twice";
      return w;
    }
    pos += kObjectHeader + static_cast<std::size_t>((object + 7) / 8 * 8);
  }
  return w;  // objects up to the end, or fewer than a header's bytes of slack
}

// The collection at byte `address` of the file, read whole and walked; its damage names the
// collection's place ("global heap at byte 2048: ...").
Walk load_collection(std::ifstream& in, std::uint64_t address, std::uint64_t file_size) {
  Walk w;
  const std::string where = "global heap at byte " + std::to_string(address) + ": ";
  const std::vector<std::uint8_t> header = address < file_size ? read_bytes(in, address, kCollectionHeader) : std::vector<std::uint8_t>{};
  if (header.size() != kCollectionHeader || !is_collection_header(header.data())) {
    w.damage = where + "no collection there";
  } else if (const std::uint64_t size = le(header.data() + 8, 8); size > file_size - address || size > kMaxHeapCollection) {
    w.damage = where + "the collection claims " + std::to_string(size) + " bytes, the file has " + std::to_string(file_size - address) +
               " from there";
  } else {
    const std::vector<std::uint8_t> collection = read_bytes(in, address, static_cast<std::size_t>(size));
    w = walk_collection(collection.data(), collection.size());
    if (w.damage) w.damage = where + *w.damage;
  }
  return w;
}

}  // namespace

std::optional<std::string> heap_collection_damage(const std::uint8_t* data, std::size_t size) {
  return walk_collection(data, size).damage;
}

std::optional<std::string> check_string_references(const std::filesystem::path& path, const std::uint8_t* raw,
                                                   std::size_t count, int address_bytes, std::uint64_t base) {
  std::error_code ec;
  const std::uint64_t file_size = std::filesystem::file_size(path, ec);
  if (ec) return "cannot read its size";
  std::ifstream in(path, std::ios::binary);
  std::map<std::uint64_t, Walk> collections;  // by address, each read once
  const std::size_t element = 4 + static_cast<std::size_t>(address_bytes) + 4;
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint8_t* e = raw + i * element;
    const std::uint64_t length = le(e, 4);
    const std::uint64_t relative = le(e + 4, address_bytes);
    const std::uint64_t address = base + relative;
    const std::uint64_t index = le(e + 4 + address_bytes, 4);
    const std::string where = "string " + std::to_string(i) + ": ";
    if (relative == 0 && index == 0) {
      if (length != 0) return where + std::to_string(length) + " bytes long, in no heap object";
      continue;  // never written: read as empty
    }
    auto it = collections.find(address);
    if (it == collections.end()) it = collections.emplace(address, load_collection(in, address, file_size)).first;
    const Walk& w = it->second;
    if (w.damage) return where + *w.damage;
    const auto object = w.objects.find(index);
    if (object == w.objects.end())
      return where + "the global heap at byte " + std::to_string(address) + " has no object " + std::to_string(index);
    if (length > object->second)
      return where + std::to_string(length) + " bytes long, its heap object holds " + std::to_string(object->second);
  }
  return std::nullopt;
}

std::optional<std::string> check_global_heaps(const std::filesystem::path& path) {
  std::error_code ec;
  const std::uint64_t file_size = std::filesystem::file_size(path, ec);
  if (ec) return std::nullopt;  // the open that follows reports it
  std::ifstream in(path, std::ios::binary);
  const std::vector<std::uint8_t> head = read_bytes(in, 0, static_cast<std::size_t>(std::min<std::uint64_t>(file_size, kHeapScanBytes)));
  if (size_of_lengths(head) != 8) return std::nullopt;
  for (std::size_t at = 0; at + kCollectionHeader <= head.size(); ++at) {
    const void* hit = std::memchr(head.data() + at, 'G', head.size() - at);
    if (!hit) break;
    at = static_cast<std::size_t>(static_cast<const std::uint8_t*>(hit) - head.data());
    if (at + kCollectionHeader > head.size() || !is_collection_header(head.data() + at)) continue;
    if (const Walk w = load_collection(in, at, file_size); w.damage) return w.damage;
  }
  return std::nullopt;
}

}  // namespace luka::capture
