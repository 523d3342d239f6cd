# cmake/DtrainFindCudaLibrary.cmake — the search FindCUDNN and FindNCCL share.
#
#   dtrain_find_cuda_library(PKG TARGET HEADER h LIBRARIES names…
#                            VERSION_HEADERS files… VERSION_MACROS major minor patch)
#
# Searches, in CMake's order: <PKG>_ROOT (a CMake variable or an environment
# variable: a module's or Spack's prefix, a tarball unpacked by hand), then
# CMAKE_PREFIX_PATH, then the CUDA toolkit's own folders (a library copied into
# the toolkit, as NVIDIA's installers do), then the system's default prefixes.
# No distribution's paths are written here: a Debian/Ubuntu multiarch folder
# (lib/x86_64-linux-gnu) is searched through CMAKE_LIBRARY_ARCHITECTURE. A pip
# wheel's layout (nvidia/<pkg>/{include,lib} holding only lib<name>.so.N) is
# found when LIBRARIES names that file too.
#
# Reads the version from the first of VERSION_HEADERS (in the include folder)
# that #defines the three VERSION_MACROS, then defines <PKG>_FOUND,
# <PKG>_INCLUDE_DIR, <PKG>_LIBRARY, <PKG>_VERSION and the imported target TARGET
# (find_package_handle_standard_args: REQUIRED and QUIET as the caller asked).
# A macro, so that what it defines is the caller's.
macro(dtrain_find_cuda_library _dfcl_pkg _dfcl_target)
  cmake_parse_arguments(_dfcl "" "HEADER" "LIBRARIES;VERSION_HEADERS;VERSION_MACROS" ${ARGN})
  set(_dfcl_hints ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_TARGET_DIR})
  if(CUDAToolkit_LIBRARY_ROOT)
    list(APPEND _dfcl_hints ${CUDAToolkit_LIBRARY_ROOT})
  endif()
  find_path(${_dfcl_pkg}_INCLUDE_DIR ${_dfcl_HEADER} HINTS ${_dfcl_hints} PATH_SUFFIXES include)
  find_library(${_dfcl_pkg}_LIBRARY NAMES ${_dfcl_LIBRARIES} NAMES_PER_DIR HINTS ${_dfcl_hints}
               PATH_SUFFIXES lib64 lib)
  list(GET _dfcl_VERSION_MACROS 0 _dfcl_maj)
  list(GET _dfcl_VERSION_MACROS 1 _dfcl_min)
  list(GET _dfcl_VERSION_MACROS 2 _dfcl_pat)
  if(${_dfcl_pkg}_INCLUDE_DIR)
    foreach(_dfcl_f ${_dfcl_VERSION_HEADERS})
      if(EXISTS "${${_dfcl_pkg}_INCLUDE_DIR}/${_dfcl_f}")
        file(STRINGS "${${_dfcl_pkg}_INCLUDE_DIR}/${_dfcl_f}" _dfcl_defs
             REGEX "^#define (${_dfcl_maj}|${_dfcl_min}|${_dfcl_pat}) +[0-9]+")
        if(_dfcl_defs)
          string(REGEX REPLACE ".*${_dfcl_maj} +([0-9]+).*" "\\1" _dfcl_vmaj "${_dfcl_defs}")
          string(REGEX REPLACE ".*${_dfcl_min} +([0-9]+).*" "\\1" _dfcl_vmin "${_dfcl_defs}")
          string(REGEX REPLACE ".*${_dfcl_pat} +([0-9]+).*" "\\1" _dfcl_vpat "${_dfcl_defs}")
          set(${_dfcl_pkg}_VERSION "${_dfcl_vmaj}.${_dfcl_vmin}.${_dfcl_vpat}")
          break()
        endif()
      endif()
    endforeach()
  endif()
  include(FindPackageHandleStandardArgs)
  find_package_handle_standard_args(${_dfcl_pkg} REQUIRED_VARS ${_dfcl_pkg}_LIBRARY ${_dfcl_pkg}_INCLUDE_DIR
                                    VERSION_VAR ${_dfcl_pkg}_VERSION)
  if(${_dfcl_pkg}_FOUND AND NOT TARGET ${_dfcl_target})
    add_library(${_dfcl_target} UNKNOWN IMPORTED)
    set_target_properties(${_dfcl_target} PROPERTIES IMPORTED_LOCATION "${${_dfcl_pkg}_LIBRARY}"
                          INTERFACE_INCLUDE_DIRECTORIES "${${_dfcl_pkg}_INCLUDE_DIR}")
  endif()
  mark_as_advanced(${_dfcl_pkg}_INCLUDE_DIR ${_dfcl_pkg}_LIBRARY)
  foreach(_dfcl_v hints maj min pat vmaj vmin vpat defs f HEADER LIBRARIES VERSION_HEADERS VERSION_MACROS
          UNPARSED_ARGUMENTS KEYWORDS_MISSING_VALUES)
    unset(_dfcl_${_dfcl_v})
  endforeach()
endmacro()
