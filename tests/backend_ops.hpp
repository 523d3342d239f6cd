// tests/backend_ops.hpp — one table of backend operations, run on every backend
// the build has and compared with the plain-loop reference (after ggml's
// test-backend-ops).
//
// An Op runs one layer operation (a kernel's forward and backward, an
// elementwise function, a whole training step of a small model, or a call the
// contract says must throw) on a backend, through that backend's own memory:
// inputs are uploaded, outputs downloaded, so the same code serves host
// backends, cpu-staged and CUDA. Inputs come from a fixed seed, identical on
// every backend. The runner runs the op on the reference and on the backend
// under test and compares every output by its tolerance class.
//
// Tolerances, stated once (rel_err: max_i |got_i − ref_i| / (1 + |ref_i|),
// tests/compare_util.hpp; inputs U(−1, 1) unless an op says otherwise):
//   exact        0      ReLU, add, accumulate, copy, fill, transfers, dropout
//                       masks, correct-prediction counts
//   elementwise  1e-5   softmax probabilities and gradients, SGD, the loss
//   kernel       1e-4   conv, linear, pooling, LRN, batch norm (float sums in
//                       another order than the reference's double sums;
//                       cuDNN/cuBLAS in FP32, TF32 off)
//   net          1e-3   a whole training step (per-kernel errors compound)
// A backend marked `bitwise` (cpu-staged wrapping the reference) is held to
// exact on every output.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compare_util.hpp"
#include "layers/backend.hpp"

namespace dtrain::test::ops {

enum class Tol { exact, elementwise, kernel, net };
double tolerance(Tol t);
const char* tol_name(Tol t);

// A backend's memory seen from a test: allocations kept alive until the end of the op.
struct Dev {
  layers::Backend& be;
  std::vector<std::shared_ptr<float>> keep;
  bool bf16_inputs = false;  // up()/put() round every value to bf16 first
  explicit Dev(layers::Backend& b) : be(b) {}
  float* zeros(size_t n);
  float* up(const Vec& v);                 // a new device copy of v
  void put(float* dev, const Vec& v);      // v → existing device buffer
  Vec down(const float* dev, size_t n);    // n floats from the device
  const int32_t* labels(const std::vector<int32_t>& l);
};

// What one op produced, by name, each with its tolerance class.
struct Output {
  std::string name;
  Vec values;
  Tol tol;
};
struct Outputs {
  std::vector<Output> list;
  void add(std::string name, Vec v, Tol t) { list.push_back({std::move(name), std::move(v), t}); }
};

struct Op {
  std::string kind;  // "conv", "pool", …, the group the op belongs to
  std::string name;  // the case, e.g. "conv 3x3 s2 p1 N=3 C=5 7x7 K=4"
  std::function<void(Dev&, Outputs&)> run;
};

// The whole table: every layer kind's kernels, the elementwise functions,
// softmax cross-entropy, SGD, a training step of lenet5 and resnet20, and the
// contract's errors (backend_ops.cpp).
const std::vector<Op>& all_ops();

struct BackendUnderTest {
  std::string name;
  std::function<std::unique_ptr<layers::Backend>()> make;
  bool bitwise = false;  // must equal the reference bit for bit
  // > 0: the tolerance of the kernel class instead of 1e-4 (bf16 kernels:
  // inputs and outputs rounded to 8-bit mantissas, exec_backend.hpp).
  double kernel_tol = 0;
  bool bf16_inputs = false;  // every input rounded to bf16, for the reference too
  std::vector<std::string> skip_kinds;  // Op::kind values not run
};

// Runs every op of the table (but b.skip_kinds) on `b` and on the reference,
// checks every output (Catch2 CHECKs, with the op and output named). Returns
// the number of ops run.
int check_all_ops(const BackendUnderTest& b);

}  // namespace dtrain::test::ops
