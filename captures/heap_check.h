// A structural check of an HDF5 file's global heap collections, made before HDF5 opens it.
//
// HDF5 1.10 (Debian 12's 1.10.8) reads a variable-length string's bytes from a global heap object
// by copying as many bytes as the object's size field says, without checking that field against
// its collection: a file damaged in that one field crashes H5Aread (docs/reliability.md). The
// capture's string attributes live in such a heap, so the reader walks the collections first and
// refuses a file whose objects do not fit in their collection. The walk is HDF5's own (objects
// padded to 8 bytes, reading on past the free space); free space of 0 bytes, where HDF5 1.10 would
// never move on (a hang loading the collection), is refused too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace luka::capture {

// How far into a file collections are looked for: the writer's heap is created with the file's
// first attributes and lies in its first few KB (at byte 2048 in HDF5 1.10's files).
inline constexpr std::size_t kHeapScanBytes = std::size_t{1} << 20;
// A larger collection is taken as damaged (HDF5 makes 4 KB ones, larger only for one larger
// object): the check never reads more than this at once.
inline constexpr std::uint64_t kMaxHeapCollection = std::uint64_t{256} << 20;

// One collection, `data` holding its `size` bytes as its header declares them (signature
// "GCOL", version 1, 8-byte lengths): what is wrong with it ("object 3 claims 1718185569 bytes,
// 4064 are left in the collection"), or nothing when every object, the free space included,
// fits and the walk reaches the collection's end.
std::optional<std::string> heap_collection_damage(const std::uint8_t* data, std::size_t size);

// The raw elements of a variable-length string dataset as stored in the file (`count` elements of
// a 4-byte length, then a heap ID: the collection's address, `address_bytes` long, and a 4-byte
// object index), checked against the collections they name, each read from the file and walked:
// "string N: ..." for the first that names no collection, no object of it, or more bytes than its
// object holds; nothing when every string can be read. HDF5 1.10 reads such an element without
// these checks (H5HG_read), and raw data carries no checksum.
// `base` is the file's base address (its user block's size), which heap addresses count from.
std::optional<std::string> check_string_references(const std::filesystem::path& path, const std::uint8_t* raw,
                                                   std::size_t count, int address_bytes, std::uint64_t base = 0);

// Every collection that starts in the file's first kHeapScanBytes bytes, each read whole:
// "global heap at byte N: ..." for the first damaged one, or nothing (also for a file whose
// superblock declares lengths other than 8 bytes, which this check does not read).
std::optional<std::string> check_global_heaps(const std::filesystem::path& path);

}  // namespace luka::capture
