# cmake/FindCUDNN.cmake — cuDNN 9 for the CUDA backend (layers/cuda/).
#
# Searched, in CMake's order: CUDNN_ROOT (a CMake variable or an environment
# variable: a module's or Spack's prefix, a tarball unpacked by hand), then
# CMAKE_PREFIX_PATH, then the CUDA toolkit's own folders (a cuDNN copied into
# the toolkit, as NVIDIA's installers do), then the system's default prefixes.
# No distribution's paths are written here: a Debian/Ubuntu multiarch folder
# (lib/x86_64-linux-gnu) is searched through CMAKE_LIBRARY_ARCHITECTURE.
# A pip wheel's layout (nvidia/cudnn/{include,lib} with only libcudnn.so.9) is
# found too: CUDNN_ROOT=.../site-packages/nvidia/cudnn.
#
# Defines CUDNN_FOUND, CUDNN_INCLUDE_DIR, CUDNN_LIBRARY, CUDNN_VERSION and the
# imported target CUDNN::cudnn.
set(_cudnn_hints ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_TARGET_DIR})
if(CUDAToolkit_LIBRARY_ROOT)
  list(APPEND _cudnn_hints ${CUDAToolkit_LIBRARY_ROOT})
endif()
find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${_cudnn_hints} PATH_SUFFIXES include)
find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 NAMES_PER_DIR HINTS ${_cudnn_hints} PATH_SUFFIXES lib64 lib)
unset(_cudnn_hints)

if(CUDNN_INCLUDE_DIR)
  foreach(_f cudnn_version.h cudnn.h)
    if(EXISTS "${CUDNN_INCLUDE_DIR}/${_f}")
      file(STRINGS "${CUDNN_INCLUDE_DIR}/${_f}" _cudnn_defs REGEX "^#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) +[0-9]+")
      if(_cudnn_defs)
        string(REGEX REPLACE ".*CUDNN_MAJOR +([0-9]+).*" "\\1" _maj "${_cudnn_defs}")
        string(REGEX REPLACE ".*CUDNN_MINOR +([0-9]+).*" "\\1" _min "${_cudnn_defs}")
        string(REGEX REPLACE ".*CUDNN_PATCHLEVEL +([0-9]+).*" "\\1" _pat "${_cudnn_defs}")
        set(CUDNN_VERSION "${_maj}.${_min}.${_pat}")
        break()
      endif()
    endif()
  endforeach()
  unset(_cudnn_defs)
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CUDNN REQUIRED_VARS CUDNN_LIBRARY CUDNN_INCLUDE_DIR VERSION_VAR CUDNN_VERSION)
if(CUDNN_FOUND AND NOT TARGET CUDNN::cudnn)
  add_library(CUDNN::cudnn UNKNOWN IMPORTED)
  set_target_properties(CUDNN::cudnn PROPERTIES IMPORTED_LOCATION "${CUDNN_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${CUDNN_INCLUDE_DIR}")
endif()
mark_as_advanced(CUDNN_INCLUDE_DIR CUDNN_LIBRARY)
