// A thin RAII layer over the HDF5 C API for the capture writer and reader. HDF5 (Debian's serial
// build) is not thread-safe: every call made through this layer holds h5::lock(). Failures become
// luka::Error with the file name and HDF5's innermost message; HDF5's own stderr printing is off.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <hdf5.h>

#include "captures/schema.h"

namespace luka::capture::h5 {

std::recursive_mutex& lock();

// Owns an hid_t and closes it with the right H5*close.
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  Handle(Handle&& o) noexcept : id_(o.id_) { o.id_ = -1; }
  Handle& operator=(Handle&& o) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }
  void reset();
  // Forgets the id without closing it (a file abandoned after a failed write stays as a killed
  // run leaves it, which readers open up to its last flushed step).
  void release() { id_ = -1; }
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  operator hid_t() const { return id_; }

 private:
  hid_t id_ = -1;
};

// Throws luka::Error("<where>: <what>: <HDF5's message>") when `id` < 0 / `status` < 0.
hid_t check(hid_t id, const std::string& where, const std::string& what);
void check_status(herr_t status, const std::string& where, const std::string& what);

// The IEEE half type (F32 with fields 15,10,5,0,10, size 2, ebias 15): what h5py reads as float16.
hid_t half_type();
// The file type a schema dataset is stored as (little-endian integers and IEEE floats; strings
// are written by write_strings).
hid_t stored_type(schema::Type type);

struct DatasetOptions {
  std::vector<hsize_t> dims, maxdims, chunk;  // maxdims H5S_UNLIMITED for growing axes
  int deflate = 1;                            // -1: no filters; else shuffle + deflate(level)
};
Handle create_dataset(hid_t parent, const std::string& name, hid_t type, const DatasetOptions& options,
                      const std::string& file);
Handle open_dataset(hid_t parent, const std::string& name, const std::string& file);
Handle create_group(hid_t parent, const std::string& name, const std::string& file);
bool exists(hid_t parent, const std::string& path);

std::vector<hsize_t> dims(hid_t dataset, const std::string& file);
void set_extent(hid_t dataset, const std::vector<hsize_t>& dims, const std::string& file);
// Writes / reads the hyperslab start[count] of `dataset` from / to contiguous memory of `mem_type`.
void write(hid_t dataset, hid_t mem_type, const std::vector<hsize_t>& start, const std::vector<hsize_t>& count,
           const void* data, const std::string& file);
void read(hid_t dataset, hid_t mem_type, const std::vector<hsize_t>& start, const std::vector<hsize_t>& count,
          void* data, const std::string& file);

void write_attr(hid_t object, const std::string& name, const std::string& value, const std::string& file);
void write_attr(hid_t object, const std::string& name, std::int64_t value, const std::string& file);
void write_attr(hid_t object, const std::string& name, const std::vector<std::int64_t>& value, const std::string& file);
bool has_attr(hid_t object, const std::string& name);
std::string read_attr_string(hid_t object, const std::string& name, const std::string& file);
std::int64_t read_attr_int(hid_t object, const std::string& name, const std::string& file);
std::vector<std::int64_t> read_attr_ints(hid_t object, const std::string& name, const std::string& file);

// A variable-length UTF-8 string dataset of `values` (written once).
void write_strings(hid_t parent, const std::string& name, const std::vector<std::string>& values, const std::string& file);
std::vector<std::string> read_strings(hid_t parent, const std::string& name, const std::string& file);

}  // namespace luka::capture::h5
