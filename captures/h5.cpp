#include "captures/h5.h"

#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>

#include "captures/heap_check.h"
#include "core/util/error.h"

namespace luka::capture::h5 {
namespace {

// HDF5's innermost error message (the most specific one), or "".
std::string hdf5_message() {
  std::string msg;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned n, const H5E_error2_t* err, void* out) -> herr_t {
        if (n == 0 && err->desc) *static_cast<std::string*>(out) = err->desc;
        return 0;
      },
      &msg);
  H5Eclear2(H5E_DEFAULT);
  // HDF5's write errors span lines ("file write failed: time = ...\n, filename = ..."): errors
  // here are one line.
  for (char& c : msg)
    if (c == '\n' || c == '\r') c = ' ';
  // A failed write carries the system's reason among its details: keep that ("No space left on
  // device") and drop the buffer addresses and offsets.
  const std::string key = "error message = '";
  if (const auto at = msg.find(key); at != std::string::npos) {
    const auto end = msg.find('\'', at + key.size());
    const std::string what = msg.substr(0, msg.find(':'));
    if (end != std::string::npos) msg = what + ": " + msg.substr(at + key.size(), end - at - key.size());
  }
  return msg;
}

struct Init {
  Init() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }
};

// Error printing is a per-thread setting in thread-safe HDF5 builds: turn it off in every thread.
void init() { thread_local Init once; }

}  // namespace

std::recursive_mutex& lock() {
  // No cleanup at exit: after a failed write (a full disk) a file can stay half-closed in HDF5's
  // tables, and its atexit handler would crash closing it again. Files are closed by their
  // owners; what a failed run had flushed stays readable. Must precede every other HDF5 call.
  static const bool no_atexit = (H5dont_atexit(), true);
  (void)no_atexit;
  static std::recursive_mutex m;
  init();
  return m;
}

Handle& Handle::operator=(Handle&& o) noexcept {
  if (this != &o) {
    reset();
    id_ = o.id_;
    o.id_ = -1;
  }
  return *this;
}

void Handle::reset() {
  if (id_ < 0) return;
  switch (H5Iget_type(id_)) {
    case H5I_FILE: H5Fclose(id_); break;
    case H5I_GROUP: H5Gclose(id_); break;
    case H5I_DATASET: H5Dclose(id_); break;
    case H5I_DATASPACE: H5Sclose(id_); break;
    case H5I_DATATYPE: H5Tclose(id_); break;
    case H5I_ATTR: H5Aclose(id_); break;
    case H5I_GENPROP_LST: H5Pclose(id_); break;
    default: break;
  }
  id_ = -1;
}

hid_t check(hid_t id, const std::string& where, const std::string& what) {
  if (id < 0) {
    const std::string m = hdf5_message();
    fail(where, what + (m.empty() ? "" : " (" + m + ")"));
  }
  return id;
}

void check_status(herr_t status, const std::string& where, const std::string& what) {
  if (status < 0) {
    const std::string m = hdf5_message();
    fail(where, what + (m.empty() ? "" : " (" + m + ")"));
  }
}

hid_t stored_type(schema::Type type) {
  switch (type) {
    case schema::Type::kInt8: return H5T_STD_I8LE;
    case schema::Type::kUInt8: return H5T_STD_U8LE;
    case schema::Type::kInt32: return H5T_STD_I32LE;
    case schema::Type::kInt64: return H5T_STD_I64LE;
    case schema::Type::kFloat16: return half_type();
    case schema::Type::kFloat32: return H5T_IEEE_F32LE;
    case schema::Type::kFloat64: return H5T_IEEE_F64LE;
    case schema::Type::kString: break;
  }
  throw std::logic_error("h5::stored_type: strings are written by write_strings");
}

hid_t half_type() {
  static const hid_t t = [] {
    init();
    const hid_t h = H5Tcopy(H5T_IEEE_F32LE);
    H5Tset_fields(h, 15, 10, 5, 0, 10);
    H5Tset_size(h, 2);
    H5Tset_ebias(h, 15);
    H5Tlock(h);
    return h;
  }();
  return t;
}

Handle create_dataset(hid_t parent, const std::string& name, hid_t type, const DatasetOptions& o, const std::string& file) {
  Handle space(check(H5Screate_simple(static_cast<int>(o.dims.size()), o.dims.data(), o.maxdims.empty() ? nullptr : o.maxdims.data()),
                     file, "dataspace for " + name));
  Handle dcpl(check(H5Pcreate(H5P_DATASET_CREATE), file, "properties for " + name));
  if (!o.chunk.empty()) {
    check_status(H5Pset_chunk(dcpl, static_cast<int>(o.chunk.size()), o.chunk.data()), file, "chunking " + name);
    if (o.deflate >= 0) {
      check_status(H5Pset_shuffle(dcpl), file, "shuffle filter for " + name);
      check_status(H5Pset_deflate(dcpl, static_cast<unsigned>(o.deflate)), file, "deflate filter for " + name);
    }
  }
  return Handle(check(H5Dcreate2(parent, name.c_str(), type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), file,
                      "cannot create dataset " + name));
}

Handle open_dataset(hid_t parent, const std::string& name, const std::string& file) {
  if (!exists(parent, name)) fail(file, "not a LuKA capture or damaged: missing dataset '" + name + "'");
  return Handle(check(H5Dopen2(parent, name.c_str(), H5P_DEFAULT), file, "cannot open dataset " + name));
}

Handle create_group(hid_t parent, const std::string& name, const std::string& file) {
  return Handle(check(H5Gcreate2(parent, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), file,
                      "cannot create group " + name));
}

bool exists(hid_t parent, const std::string& path) {
  // Check each component, as H5Lexists requires the intermediate groups to exist.
  std::string prefix;
  std::size_t pos = 0;
  while (pos <= path.size()) {
    const std::size_t slash = path.find('/', pos);
    const std::string part = path.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
    prefix += (prefix.empty() ? "" : "/") + part;
    if (H5Lexists(parent, prefix.c_str(), H5P_DEFAULT) <= 0) {
      H5Eclear2(H5E_DEFAULT);
      return false;
    }
    if (slash == std::string::npos) break;
    pos = slash + 1;
  }
  return true;
}

std::vector<hsize_t> dims(hid_t dataset, const std::string& file) {
  Handle space(check(H5Dget_space(dataset), file, "dataspace"));
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank < 0) check(rank, file, "dataspace rank");
  std::vector<hsize_t> d(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(space, d.data(), nullptr);
  return d;
}

void set_extent(hid_t dataset, const std::vector<hsize_t>& d, const std::string& file) {
  check_status(H5Dset_extent(dataset, d.data()), file, "cannot extend a dataset");
}

namespace {
void transfer(bool writing, hid_t dataset, hid_t mem_type, const std::vector<hsize_t>& start,
              const std::vector<hsize_t>& count, void* data, const std::string& file) {
  for (const hsize_t c : count)
    if (c == 0) return;
  Handle fspace(check(H5Dget_space(dataset), file, "dataspace"));
  check_status(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr), file,
               "selection outside the dataset");
  Handle mspace(check(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr), file, "memory space"));
  if (writing)
    check_status(H5Dwrite(dataset, mem_type, mspace, fspace, H5P_DEFAULT, data), file, "write failed");
  else
    check_status(H5Dread(dataset, mem_type, mspace, fspace, H5P_DEFAULT, data), file, "read failed (truncated or damaged file?)");
}
}  // namespace

void write(hid_t dataset, hid_t mem_type, const std::vector<hsize_t>& start, const std::vector<hsize_t>& count,
           const void* data, const std::string& file) {
  transfer(true, dataset, mem_type, start, count, const_cast<void*>(data), file);
}

void read(hid_t dataset, hid_t mem_type, const std::vector<hsize_t>& start, const std::vector<hsize_t>& count, void* data,
          const std::string& file) {
  transfer(false, dataset, mem_type, start, count, data, file);
}

namespace {
// A variable-length string in memory; `cset` must match the file's (HDF5 converts no charsets).
Handle string_type(H5T_cset_t cset = H5T_CSET_UTF8) {
  Handle t(H5Tcopy(H5T_C_S1));
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, cset);
  return t;
}
}  // namespace

void write_attr(hid_t object, const std::string& name, const std::string& value, const std::string& file) {
  Handle type = string_type();
  Handle space(check(H5Screate(H5S_SCALAR), file, "attribute space"));
  Handle attr(check(H5Acreate2(object, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), file, "attribute " + name));
  const char* p = value.c_str();
  check_status(H5Awrite(attr, type, &p), file, "attribute " + name);
}

void write_attr(hid_t object, const std::string& name, std::int64_t value, const std::string& file) {
  Handle space(check(H5Screate(H5S_SCALAR), file, "attribute space"));
  Handle attr(check(H5Acreate2(object, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT), file, "attribute " + name));
  check_status(H5Awrite(attr, H5T_NATIVE_INT64, &value), file, "attribute " + name);
}

void write_attr(hid_t object, const std::string& name, const std::vector<std::int64_t>& value, const std::string& file) {
  const hsize_t n = value.size();
  Handle space(check(n ? H5Screate_simple(1, &n, nullptr) : H5Screate(H5S_NULL), file, "attribute space"));
  Handle attr(check(H5Acreate2(object, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT), file, "attribute " + name));
  if (n) check_status(H5Awrite(attr, H5T_NATIVE_INT64, value.data()), file, "attribute " + name);
}

bool has_attr(hid_t object, const std::string& name) {
  const htri_t r = H5Aexists(object, name.c_str());
  if (r < 0) H5Eclear2(H5E_DEFAULT);
  return r > 0;
}

namespace {
Handle open_attr(hid_t object, const std::string& name, const std::string& file) {
  if (!has_attr(object, name)) fail(file, "not a LuKA capture or damaged: missing attribute '" + name + "'");
  return Handle(check(H5Aopen(object, name.c_str(), H5P_DEFAULT), file, "attribute " + name));
}
}  // namespace

std::string read_attr_string(hid_t object, const std::string& name, const std::string& file) {
  Handle attr = open_attr(object, name, file);
  Handle ftype(check(H5Aget_type(attr), file, "attribute " + name));
  if (H5Tget_class(ftype) != H5T_STRING) fail(file, "attribute '" + name + "' is not a string");
  Handle space(check(H5Aget_space(attr), file, "attribute " + name));
  if (H5Sget_simple_extent_npoints(space) != 1) fail(file, "attribute '" + name + "' is not a single string");
  if (H5Tis_variable_str(ftype) > 0) {
    Handle type = string_type(H5Tget_cset(ftype));
    char* p = nullptr;
    check_status(H5Aread(attr, type, &p), file, "attribute " + name);
    std::string s = p ? p : "";
    H5free_memory(p);
    return s;
  }
  const std::size_t size = H5Tget_size(ftype);
  std::string s(size, '\0');
  check_status(H5Aread(attr, ftype, s.data()), file, "attribute " + name);
  s.resize(std::min(s.size(), s.find('\0')));
  return s;
}

std::vector<std::int64_t> read_attr_ints(hid_t object, const std::string& name, const std::string& file) {
  Handle attr = open_attr(object, name, file);
  Handle ftype(check(H5Aget_type(attr), file, "attribute " + name));
  if (H5Tget_class(ftype) != H5T_INTEGER) fail(file, "attribute '" + name + "' is not an integer");
  Handle space(check(H5Aget_space(attr), file, "attribute " + name));
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  std::vector<std::int64_t> v(static_cast<std::size_t>(std::max<hssize_t>(n, 0)));
  if (!v.empty()) check_status(H5Aread(attr, H5T_NATIVE_INT64, v.data()), file, "attribute " + name);
  return v;
}

std::int64_t read_attr_int(hid_t object, const std::string& name, const std::string& file) {
  const auto v = read_attr_ints(object, name, file);
  if (v.size() != 1) fail(file, "attribute '" + name + "' is not a single integer");
  return v[0];
}

void write_strings(hid_t parent, const std::string& name, const std::vector<std::string>& values, const std::string& file) {
  Handle type = string_type();
  const hsize_t n = values.size();
  Handle space(check(H5Screate_simple(1, &n, nullptr), file, "dataspace for " + name));
  Handle ds(check(H5Dcreate2(parent, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), file,
                  "cannot create dataset " + name));
  std::vector<const char*> p;
  for (const auto& v : values) p.push_back(v.c_str());
  if (n) check_status(H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, p.data()), file, "write " + name);
}

namespace {

// What is wrong with the stored references of a string list of `n` elements, or nothing.
std::optional<std::string> stored_string_damage(hid_t ds, hsize_t n) {
  Handle dcpl(H5Dget_create_plist(ds));
  if (!dcpl.valid() || H5Pget_layout(dcpl) != H5D_CONTIGUOUS) {
    H5Eclear2(H5E_DEFAULT);
    return std::string("not stored contiguous, as the writer stores string lists");
  }
  Handle file_id(H5Iget_file_id(ds));
  Handle fcpl(file_id.valid() ? H5Fget_create_plist(file_id) : H5I_INVALID_HID);
  std::size_t address_bytes = 0, length_bytes = 0;
  hsize_t user_block = 0;
  if (!fcpl.valid() || H5Pget_sizes(fcpl, &address_bytes, &length_bytes) < 0 || H5Pget_userblock(fcpl, &user_block) < 0 ||
      address_bytes < 2 || address_bytes > 8) {
    H5Eclear2(H5E_DEFAULT);
    return std::string("the file's address size cannot be read");
  }
  const haddr_t offset = H5Dget_offset(ds);
  if (offset == HADDR_UNDEF) {
    H5Eclear2(H5E_DEFAULT);
    return std::nullopt;  // never written: HDF5 reads empty strings
  }
  const std::uint64_t element = 4 + address_bytes + 4;
  if (H5Dget_storage_size(ds) != n * element)
    return "stores " + std::to_string(H5Dget_storage_size(ds)) + " bytes for " + std::to_string(n) + " strings of " +
           std::to_string(element);
  const ssize_t name_size = H5Fget_name(ds, nullptr, 0);
  if (name_size <= 0) {
    H5Eclear2(H5E_DEFAULT);
    return std::string("the file's name cannot be read");
  }
  std::string path(static_cast<std::size_t>(name_size) + 1, '\0');
  H5Fget_name(ds, path.data(), path.size());
  path.resize(static_cast<std::size_t>(name_size));
  std::error_code ec;
  const std::uint64_t file_size = std::filesystem::file_size(path, ec);
  if (ec || offset > file_size || n * element > file_size - offset) return std::string("its references are cut off");
  std::vector<std::uint8_t> raw(static_cast<std::size_t>(n * element));
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size()));
  if (in.gcount() != static_cast<std::streamsize>(raw.size())) return std::string("its references are cut off");
  return check_string_references(path, raw.data(), static_cast<std::size_t>(n), static_cast<int>(address_bytes), user_block);
}

}  // namespace

std::vector<std::string> read_strings(hid_t parent, const std::string& name, const std::string& file) {
  Handle ds = open_dataset(parent, name, file);
  Handle ftype(check(H5Dget_type(ds), file, name));
  if (H5Tget_class(ftype) != H5T_STRING || H5Tis_variable_str(ftype) <= 0) fail(file, "dataset '" + name + "' is not a string list");
  const auto d = dims(ds, file);
  if (d.size() != 1) fail(file, "dataset '" + name + "' is not a list");
  // HDF5 1.10 reads each string from the heap object its stored reference names without checking
  // the reference (captures/heap_check.h): the raw references are checked first.
  if (d[0]) {
    if (const std::optional<std::string> damage = stored_string_damage(ds, d[0]))
      fail(file, "damaged capture: dataset '" + name + "': " + *damage);
  }
  Handle type = string_type(H5Tget_cset(ftype));
  std::vector<char*> p(d[0], nullptr);
  if (d[0]) check_status(H5Dread(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, p.data()), file, "read " + name);
  std::vector<std::string> out;
  for (char* s : p) {
    out.emplace_back(s ? s : "");
    H5free_memory(s);
  }
  return out;
}

}  // namespace luka::capture::h5
