// io/checkpoint_file.cpp — the HDF5 layout of one checkpoint file (see
// checkpoint.hpp "File layout"): writing it under a temporary name, and
// reading it back with every check a damaged or foreign file can fail.
//
// The reader trusts nothing: the format and version attributes, the complete
// flag, each attribute's dtype and rank, each array's dtype, its stored size
// against its shape (a corrupt shape must not become a huge allocation) and
// its crc32. Every failure is a UsageError naming the file and the object; all
// handles are RAII (H5Id), so a failed read leaves no HDF5 object open.
#include "io/checkpoint_file.hpp"

#include <zlib.h>

#include <algorithm>
#include <bit>

#include "core/error.hpp"
#include "io/h5_util.hpp"

namespace dtrain::io {

// The crc32 covers the little-endian float32 bytes the file holds; on this
// host those are the bytes of the in-memory vector.
static_assert(std::endian::native == std::endian::little, "crc32 of float32 assumes little endian");

namespace {

constexpr const char* kFormat = "dtrain-checkpoint";
constexpr int64_t kVersion = 1;
constexpr const char* kArrays = "arrays";

uint32_t crc32_of(const std::vector<float>& v) {
  const auto* bytes = reinterpret_cast<const Bytef*>(v.data());
  return uint32_t(::crc32_z(::crc32_z(0L, Z_NULL, 0), bytes, v.size() * sizeof(float)));
}

// ---- writing ---------------------------------------------------------------

// A scalar attribute `name` on `loc` of file type `ftype`, written from
// `value` in memory type `mtype`; `space` is scalar unless given (H5S_NULL
// for an empty string).
void put_attr(hid_t loc, const std::string& name, hid_t ftype, hid_t mtype, const void* value,
              const std::string& where, H5S_class_t space_class = H5S_SCALAR) {
  H5Id space(DT_H5(H5Screate(space_class)), H5Sclose);
  H5Id attr(H5Acreate2(loc, name.c_str(), ftype, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.valid()) DT_FAIL(where, ": cannot create attribute '", name, "'", h5_error_suffix());
  if (space_class != H5S_NULL && H5Awrite(attr.get(), mtype, value) < 0)
    DT_FAIL(where, ": writing attribute '", name, "' failed", h5_error_suffix());
}

void put_int(hid_t loc, const std::string& name, int64_t v, const std::string& where) {
  put_attr(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v, where);
}

// Fixed-length strings of exactly the value's bytes (NULLPAD, so embedded
// and trailing NULs survive); an empty one has a null dataspace.
void put_string(hid_t loc, const std::string& name, const std::string& v,
                const std::string& where) {
  H5Id type(DT_H5(H5Tcopy(H5T_C_S1)), H5Tclose);
  DT_H5(H5Tset_size(type.get(), std::max<size_t>(v.size(), 1)));
  DT_H5(H5Tset_strpad(type.get(), H5T_STR_NULLPAD));
  put_attr(loc, name, type.get(), type.get(), v.data(), where, v.empty() ? H5S_NULL : H5S_SCALAR);
}

// /arrays/<name>: contiguous float32 (so H5Dget_offset finds its bytes), crc32 attribute.
void put_array(hid_t group, const std::string& name, const FloatArray& a,
               const std::string& where) {
  int64_t n = 1;
  for (int64_t d : a.shape) {
    DT_CHECK(d >= 0, where, ": array '", name, "': negative extent ", d);
    n *= d;
  }
  DT_CHECK(size_t(n) == a.data.size(), where, ": array '", name, "': shape holds ", n,
           " values, data ", a.data.size());
  std::vector<hsize_t> dims(a.shape.begin(), a.shape.end());
  H5Id space(a.shape.empty() ? H5Screate(H5S_SCALAR)
                             : H5Screate_simple(int(dims.size()), dims.data(), nullptr),
             H5Sclose);
  DT_CHECK(space.valid(), where, ": array '", name, "': bad shape", h5_error_suffix());
  H5Id dset(H5Dcreate2(group, name.c_str(), H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, H5P_DEFAULT,
                       H5P_DEFAULT),
            H5Dclose);
  if (!dset.valid()) DT_FAIL(where, ": cannot create /arrays/", name, h5_error_suffix());
  if (n > 0 &&
      H5Dwrite(dset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, a.data.data()) < 0)
    DT_FAIL(where, ": writing /arrays/", name, " failed", h5_error_suffix());
  const uint32_t crc = crc32_of(a.data);
  put_attr(dset.get(), "crc32", H5T_STD_U32LE, H5T_NATIVE_UINT32, &crc,
           where + ": /arrays/" + name);
}

// Keys become HDF5 names: one namespace for all root attributes, no '/' in
// array names (one level under /arrays).
void check_names(const CheckpointState& s, const std::string& where) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : s.ints) keys.push_back(k);
  for (const auto& [k, v] : s.reals) keys.push_back(k);
  for (const auto& [k, v] : s.strings) keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  for (size_t i = 0; i < keys.size(); ++i) {
    DT_CHECK(!keys[i].empty(), where, ": an empty state key");
    DT_CHECK(keys[i] != "format" && keys[i] != "version" && keys[i] != "complete", where,
             ": state key '", keys[i], "' is reserved");
    DT_CHECK(i == 0 || keys[i] != keys[i - 1], where, ": state key '", keys[i],
             "' given twice (ints, reals and strings share one namespace)");
  }
  for (const auto& [k, v] : s.arrays)
    DT_CHECK(!k.empty() && k != "." && k.find('/') == std::string::npos, where,
             ": bad array name '", k, "'");
}

// ---- reading ---------------------------------------------------------------

// Opens attribute `name` of `loc` and requires a scalar (or, when allowed,
// null) dataspace. `where` names the file and object for messages.
H5Id get_attr(hid_t loc, const char* name, const std::string& where, bool* is_null = nullptr) {
  if (H5Aexists(loc, name) <= 0) DT_USAGE(where, ": attribute '", name, "' is missing");
  H5Id attr(H5Aopen(loc, name, H5P_DEFAULT), H5Aclose);
  if (!attr.valid()) DT_USAGE(where, ": cannot open attribute '", name, "'", h5_error_suffix());
  H5Id space(DT_H5(H5Aget_space(attr.get())), H5Sclose);
  const H5S_class_t cls = H5Sget_simple_extent_type(space.get());
  if (is_null) *is_null = cls == H5S_NULL;
  if (!(cls == H5S_SCALAR || (is_null && cls == H5S_NULL)))
    DT_USAGE(where, ": attribute '", name, "': rank is ", H5Sget_simple_extent_ndims(space.get()),
             ", expected a scalar");
  return attr;
}

// The value of a scalar numeric attribute, which must be of class `cls`, `size` bytes.
template <typename T>
T get_number(hid_t loc, const char* name, H5T_class_t cls, size_t size, hid_t mtype,
             const std::string& where, const char* expected) {
  H5Id attr = get_attr(loc, name, where);
  H5Id type(DT_H5(H5Aget_type(attr.get())), H5Tclose);
  if (H5Tget_class(type.get()) != cls || H5Tget_size(type.get()) != size)
    DT_USAGE(where, ": attribute '", name, "': dtype is ", h5_type_name(type.get()), ", expected ",
             expected);
  T v{};
  if (H5Aread(attr.get(), mtype, &v) < 0)
    DT_USAGE(where, ": attribute '", name, "': read failed", h5_error_suffix());
  return v;
}

std::string get_string(hid_t loc, const char* name, const std::string& where) {
  bool is_null = false;
  H5Id attr = get_attr(loc, name, where, &is_null);
  H5Id type(DT_H5(H5Aget_type(attr.get())), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_STRING || H5Tis_variable_str(type.get()) > 0)
    DT_USAGE(where, ": attribute '", name, "': dtype is ", h5_type_name(type.get()),
             ", expected a fixed-length string");
  if (is_null) return {};
  std::string v(H5Tget_size(type.get()), '\0');
  if (H5Aread(attr.get(), type.get(), v.data()) < 0)
    DT_USAGE(where, ": attribute '", name, "': read failed", h5_error_suffix());
  return v;
}

herr_t collect_name(hid_t, const char* name, const H5A_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->emplace_back(name);
  return 0;
}

// The link names of a group in name order (H5Lget_name_by_idx: the same call
// in every HDF5 version, unlike H5Literate's callback type).
std::vector<std::string> link_names(hid_t group) {
  H5G_info_t info{};
  DT_H5(H5Gget_info(group, &info));
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t len = DT_H5(
        H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT));
    std::string n(size_t(len) + 1, '\0');
    DT_H5(H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, n.data(), n.size(),
                             H5P_DEFAULT));
    n.resize(size_t(len));
    names.push_back(std::move(n));
  }
  return names;
}

void read_state_attrs(hid_t file, const std::string& path, CheckpointState& s) {
  std::vector<std::string> names;
  DT_H5(H5Aiterate2(file, H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_name, &names));
  for (const std::string& n : names) {
    if (n == "format" || n == "version" || n == "complete") continue;
    H5Id attr(DT_H5(H5Aopen(file, n.c_str(), H5P_DEFAULT)), H5Aclose);
    H5Id type(DT_H5(H5Aget_type(attr.get())), H5Tclose);
    const H5T_class_t cls = H5Tget_class(type.get());
    const size_t size = H5Tget_size(type.get());
    attr.reset();
    if (cls == H5T_INTEGER && size == 8 && H5Tget_sign(type.get()) == H5T_SGN_2)
      s.ints[n] = get_number<int64_t>(file, n.c_str(), cls, 8, H5T_NATIVE_INT64, path, "int64");
    else if (cls == H5T_FLOAT && size == 8)
      s.reals[n] = get_number<double>(file, n.c_str(), cls, 8, H5T_NATIVE_DOUBLE, path, "float64");
    else if (cls == H5T_STRING)
      s.strings[n] = get_string(file, n.c_str(), path);
    else
      DT_USAGE(path, ": attribute '", n, "': dtype is ", h5_type_name(type.get()),
               ", expected int64, float64 or string");
  }
}

FloatArray read_array(hid_t group, const std::string& name, const std::string& path) {
  const std::string where = path + ": /arrays/" + name;
  H5Id dset(H5Dopen2(group, name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!dset.valid()) DT_USAGE(where, ": not a readable dataset", h5_error_suffix());
  H5Id type(DT_H5(H5Dget_type(dset.get())), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_FLOAT || H5Tget_size(type.get()) != 4)
    DT_USAGE(where, ": dtype is ", h5_type_name(type.get()), ", expected float32");
  H5Id space(DT_H5(H5Dget_space(dset.get())), H5Sclose);
  if (H5Sget_simple_extent_type(space.get()) == H5S_NULL) DT_USAGE(where, ": has no dataspace");
  const int rank = DT_H5(H5Sget_simple_extent_ndims(space.get()));
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  DT_H5(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr));
  FloatArray a;
  a.shape.assign(dims.begin(), dims.end());
  const hssize_t n = DT_H5(H5Sget_simple_extent_npoints(space.get()));
  // A corrupt shape must not turn into a huge allocation: the bytes must exist.
  const hsize_t stored = H5Dget_storage_size(dset.get());
  if (n > 0 && stored != hsize_t(n) * sizeof(float))
    DT_USAGE(where, ": ", stored, " bytes stored for ", n, " values (truncated or corrupt)");
  const auto crc =
      get_number<uint32_t>(dset.get(), "crc32", H5T_INTEGER, 4, H5T_NATIVE_UINT32, where, "uint32");
  a.data.resize(size_t(n));
  if (n > 0 &&
      H5Dread(dset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, a.data.data()) < 0)
    DT_USAGE(where, ": read failed (a truncated or damaged file?)", h5_error_suffix());
  if (crc32_of(a.data) != crc)
    DT_USAGE(where, ": crc32 mismatch (stored ", crc, ", computed ", crc32_of(a.data),
             "): the data is corrupt");
  return a;
}

CheckpointState read_checkpoint_file(const std::string& path) {
  H5Id file = open_h5_read_only(path);  // missing, not HDF5, truncated: UsageError
  if (H5Aexists(file.get(), "format") <= 0)
    DT_USAGE(path, ": not a dtrain checkpoint (no attribute 'format')");
  const std::string format = get_string(file.get(), "format", path);
  if (format != kFormat) DT_USAGE(path, ": not a dtrain checkpoint (format '", format, "')");
  const auto version =
      get_number<int64_t>(file.get(), "version", H5T_INTEGER, 8, H5T_NATIVE_INT64, path, "int64");
  if (version != kVersion)
    DT_USAGE(path, ": checkpoint version ", version, ", this dtrain reads version ", kVersion);
  if (H5Aexists(file.get(), "complete") <= 0 ||
      get_number<int64_t>(file.get(), "complete", H5T_INTEGER, 8, H5T_NATIVE_INT64, path,
                          "int64") != 1)
    DT_USAGE(path, ": incomplete checkpoint (attribute 'complete' is not 1)");
  CheckpointState s;
  read_state_attrs(file.get(), path, s);
  H5Id group(H5Gopen2(file.get(), kArrays, H5P_DEFAULT), H5Gclose);
  if (!group.valid()) DT_USAGE(path, ": group /arrays is missing", h5_error_suffix());
  for (const std::string& n : link_names(group.get()))
    s.arrays[n] = read_array(group.get(), n, path);
  return s;
}

}  // namespace

void write_checkpoint_file(const std::string& where, const CheckpointState& s,
                           const std::function<void()>& kill_point) {
  quiet_h5_errors();
  check_names(s, where);
  H5Id fapl = make_fapl_no_locking();
  // 1.8 object headers: attributes over 64 KiB (RNG states) go to dense storage.
  DT_H5(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_LATEST));
  H5Id file(H5Fcreate(where.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose);
  if (!file.valid()) DT_FAIL("cannot create ", where, h5_error_suffix());
  put_string(file.get(), "format", kFormat, where);
  put_int(file.get(), "version", kVersion, where);
  kill_point();
  {
    H5Id group(H5Gcreate2(file.get(), kArrays, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
    if (!group.valid()) DT_FAIL(where, ": cannot create /arrays", h5_error_suffix());
    for (const auto& [n, a] : s.arrays) {
      put_array(group.get(), n, a, where);
      kill_point();
    }
  }
  for (const auto& [k, v] : s.ints) put_int(file.get(), k, v, where);
  for (const auto& [k, v] : s.reals)
    put_attr(file.get(), k, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v, where);
  for (const auto& [k, v] : s.strings) put_string(file.get(), k, v, where);
  kill_point();
  put_int(file.get(), "complete", 1, where);
  kill_point();
  if (H5Fclose(file.release()) < 0) DT_FAIL("closing ", where, " failed", h5_error_suffix());
  // HDF5 keeps the memory of freed objects on its own free lists; a long run
  // writes thousands of checkpoints, so hand it back after each.
  H5garbage_collect();
}

CheckpointState read_checkpoint(const std::string& path) {
  try {
    return read_checkpoint_file(path);
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    // An HDF5 call that failed on a damaged file is still the file's fault.
    DT_USAGE(path, ": unreadable checkpoint: ", e.what());
  }
}

}  // namespace dtrain::io
