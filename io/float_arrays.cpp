// io/float_arrays.cpp — named 1-D float32 arrays in one HDF5 file (see float_arrays.hpp).
#include "io/float_arrays.hpp"

#include "core/error.hpp"
#include "io/h5_util.hpp"

namespace dtrain::io {

void save_float_arrays(const std::string& path,
                       const std::vector<std::pair<std::string, std::span<const float>>>& arrays,
                       const std::vector<std::pair<std::string, std::string>>& root_attributes) {
  H5TempFile file(path);
  H5Id lcpl(DT_H5(H5Pcreate(H5P_LINK_CREATE)), H5Pclose);
  DT_H5(H5Pset_create_intermediate_group(lcpl.get(), 1));
  for (const auto& [name, values] : arrays) {
    DT_CHECK(!name.empty(), path, ": empty array name");
    DT_CHECK(H5Lexists(file.id(), name.c_str(), H5P_DEFAULT) <= 0, path, ": duplicate array '",
             name, "'");
    H5Eclear2(H5E_DEFAULT);  // H5Lexists on a missing intermediate group leaves an error
    hsize_t dims[1] = {hsize_t(values.size())};
    H5Id space(DT_H5(H5Screate_simple(1, dims, nullptr)), H5Sclose);
    H5Id dset(H5Dcreate2(file.id(), name.c_str(), H5T_IEEE_F32LE, space.get(), lcpl.get(),
                         H5P_DEFAULT, H5P_DEFAULT),
              H5Dclose);
    if (!dset.valid()) DT_FAIL(path, ": cannot create /", name, h5_error_suffix());
    if (!values.empty() &&
        H5Dwrite(dset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) < 0)
      DT_FAIL(path, ": writing /", name, " failed", h5_error_suffix());
  }
  for (const auto& [name, text] : root_attributes) write_string_attribute(file.id(), name.c_str(), text);
  file.commit();
}

std::vector<float> load_float_array(const std::string& path, const std::string& name) {
  H5Id file = open_h5_read_only(path);
  const std::string obj = "/" + name;
  // H5Lexists needs every intermediate group to exist; H5Oexists_by_name likewise,
  // so try to open and report a failure as "missing".
  H5Id dset(H5Dopen2(file.get(), name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!dset.valid()) DT_USAGE(path, ": ", obj, ": dataset is missing", h5_error_suffix());
  H5Id type(H5Dget_type(dset.get()), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_FLOAT || H5Tget_size(type.get()) != 4)
    DT_USAGE(path, ": ", obj, ": dtype is ", h5_type_name(type.get()), ", expected float32");
  H5Id space(H5Dget_space(dset.get()), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank != 1) DT_USAGE(path, ": ", obj, ": rank is ", rank, ", expected 1");
  hsize_t n = 0;
  H5Sget_simple_extent_dims(space.get(), &n, nullptr);
  std::vector<float> out(n);
  if (n > 0 && H5Dread(dset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0)
    DT_USAGE(path, ": ", obj, ": read failed (a truncated or damaged file?)", h5_error_suffix());
  return out;
}

}  // namespace dtrain::io
