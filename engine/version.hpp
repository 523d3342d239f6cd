// engine/version.hpp — what `dtrain --version` prints: the commit this binary
// was built from and the libraries it was built with. Defined in a file the
// build writes at every build (cmake/VersionInfo.cmake), so that a rebuilt
// binary names its own commit, not the one CMake was configured at.
#pragma once

namespace dtrain::engine {

// "commit <12 hex digits of HEAD>[-dirty] (<commit date>)"; "not built from a
// git checkout" (a source tarball, or no git at build time); "commit unknown
// (git: …)" when git would not read the checkout.
const char* build_commit();
// One line per fact: build type and compiler, oneDNN, BLAS, MPI, HDF5, Boost,
// CUDA/cuDNN/NCCL (each as CMake found it).
const char* build_facts();

}  // namespace dtrain::engine
