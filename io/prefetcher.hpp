// io/prefetcher.hpp — the training loader: minibatches read, decoded and
// augmented by T worker threads, D batches ahead of the trainer, delivered in
// step order (DESIGN.md §1; the paper's first lever: hide I/O under compute).
//
// Structure (Caffe's BasePrefetchingDataLayer, LBANN's buffered_data_coordinator):
// D + 1 preallocated batch buffers cycle between a free queue and a full queue.
// Batch k of the plan (ticket k → (epoch, step), io::Sampler) goes through
//   1. read    — one thread at a time (HDF5 holds one global lock anyway): take a
//                free buffer, the sample indices from the Sampler, the stored
//                bytes through Dataset::read_stored (pixels of a raw file, JPEGs
//                of a jpeg one; sorted-run hyperslabs; the indices are sorted
//                here, so HDF5 writes straight into the buffer and decode reads
//                each sample from its sorted position);
//   2. decode  — split into parts that any idle thread picks up, outside every
//                lock: JPEG decode, the sample's crop / resize / flip, float CHW
//                normalised per channel (io/sample_decoder.hpp, io/augment.hpp;
//                randomness = f(seed, epoch, sample index)), one SampleDecoder
//                per thread;
//   3. full    — the buffer waits in the full queue, keyed by ticket; next()
//                hands out ticket 0, 1, 2, … whichever thread finished first.
// Threads prefer reading while fewer than T batches wait for decoding, so the
// serialised reads stay busy; with T = 1 a thread reads then decodes each batch.
//
// Errors: an exception in a worker (a read failure, a bad index) stops the
// workers and is rethrown by every later next(); stop() and the destructor
// wake and join all threads, never waiting longer than one HDF5 read call.
// The engine must not fork while a Prefetcher exists (threads + fork).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "io/augment.hpp"
#include "io/dataset.hpp"
#include "io/sample_decoder.hpp"
#include "io/sampler.hpp"

namespace dtrain::io {

inline constexpr int kMaxDefaultLoaderThreads = 8;

// Loader threads per rank: SLURM_CPUS_PER_TASK when set, else the host's cores
// divided by the ranks on it; clamped to [1, kMaxDefaultLoaderThreads] (reads
// serialise on HDF5's lock, so more decode threads rarely help).
int default_loader_threads(int ranks_on_host);

// A task's CPUs (Slurm's --cpus-per-task, `cpus` ≥ 1) shared by its compute
// and loader threads, so that both fit inside them: a GPU rank's compute
// threads only drive the device, so 1 computes and the rest load; a CPU rank
// loads with a quarter (at least 1, at most kMaxDefaultLoaderThreads) and
// computes with the rest. One CPU gives 1 to each (the loaders sleep while
// their batches are ready).
struct TaskCpuSplit {
  int compute = 1, loaders = 1;
};
TaskCpuSplit split_task_cpus(long cpus, bool gpu);

// Buffer memory: plain aligned host memory by default; the trainer's device path
// passes the backend's pinned host memory (Backend::host_alloc, cudaHostAlloc on
// CUDA) so the per-step upload runs at full bandwidth.
struct BufferAllocator {
  std::function<void*(size_t bytes)> allocate;  // null → aligned operator new
  std::function<void(void*)> release;           // must match allocate
};

struct PrefetchOptions {
  int threads = 0;             // T worker threads; ≤ 0 → default_loader_threads(1)
  int depth = 2;               // D ≥ 1 batches produced ahead of the consumer's one
  std::vector<float> mean;     // per channel, on pixel/255 (empty = 0)
  std::vector<float> std;      // per channel (empty = 1)
  AugmentOptions augment;      // crops (none | crop | rrc), padding, flip; off by default
  ImageShape input;            // the network input of one sample; h = 0 → the file's fixed shape (raw)
  int64_t resize = 0;          // R of the fixed crops (InputTransform); 0 → default_resize(input)
  bool dct_scaling = true;     // JPEG decode at 1/2, 1/4, 1/8 when the region allows (sample_decoder.hpp)
  bool fit_raw = false;        // raw images of another size resized + cropped (InputTransform::fit_raw)
  uint64_t seed = 0;           // augmentation seed (independent of the Sampler's)
  int64_t start_epoch = 0;     // first batch delivered: (start_epoch, start_step)
  int64_t start_step = 0;      //   (a resumed run continues its plan)
  int64_t total_batches = -1;  // batches to deliver; −1 = unbounded
  BufferAllocator allocator;
  // Test only: a cost added to every read, inside the read lock (seconds), and a
  // hook run there before each read (may throw, to inject a failure).
  double injected_read_delay_s = 0;
  std::function<void(int64_t epoch, int64_t step)> test_before_read;
  // Test only: run before each sample's decode, outside every lock (may sleep,
  // to shuffle the order in which threads finish).
  std::function<void(int64_t index)> test_before_decode;
};

// One delivered minibatch. Valid until release() or the next next().
struct Batch {
  float* x = nullptr;            // [B, C, H, W] float (the network input), normalised and augmented
  int32_t* labels = nullptr;     // [B]
  std::vector<int64_t> indices;  // [B] dataset indices, in Sampler order
  int64_t size = 0;              // B
  int64_t epoch = 0, step = 0;   // position in the plan
  double wait_s = 0;             // seconds next() blocked for this batch (I/O wait)
  double read_s = 0;             // seconds of its read (HDF5 + injected cost)
  double produce_s = 0;          // seconds from its read start to ready
};

struct PrefetchStats {
  int64_t batches = 0;     // delivered by next()
  double io_wait_s = 0;    // total seconds next() blocked (the trainer's t_io_wait)
  double read_s = 0;       // sum of per-batch read seconds (serialised)
  double produce_s = 0;    // sum of per-batch read-start → ready seconds
  int64_t produced = 0;    // batches that reached the full queue
  double decode_s = 0;     // wall seconds in decode parts (JPEG decode, crop, resize, normalise), summed over threads
  double decode_cpu_s = 0; // CPU seconds of the same (CLOCK_THREAD_CPUTIME_ID): the cost without time sharing
  int64_t decoded = 0;     // samples decoded
};

class Prefetcher {
 public:
  // `data` must outlive the Prefetcher; `plan` gives each step's indices
  // (plan.n() ≤ data.n()). Starts the threads. Throws Error on bad options,
  // UsageError when the transform does not fit the file (check_transform).
  Prefetcher(const Dataset& data, Sampler plan, PrefetchOptions options);
  ~Prefetcher();  // stop()
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // The next batch in plan order; blocks until it is ready. Releases the batch
  // returned before. Rethrows a worker's exception; throws Error after stop()
  // or once total_batches were delivered.
  const Batch& next();
  // Returns the held batch's buffer to the free queue early (optional).
  void release();
  // Stops and joins the threads (idempotent). next() afterwards throws.
  void stop();

  PrefetchStats stats() const;
  int threads() const { return threads_; }
  int depth() const { return depth_; }
  int64_t minibatch() const { return b_; }
  const InputTransform& transform() const { return transform_; }
  int64_t steps_per_epoch() const { return plan_.steps_per_epoch(); }

 private:
  enum class State { Free, Reading, Decoding, Ready, Held };
  struct Slot {
    Batch batch;
    StoredSamples stored;          // the stored bytes of the U distinct indices, sorted
    std::vector<int64_t> sorted;   // [U] distinct indices in file order (one read, no staging)
    std::vector<int64_t> pos;      // [B] position in stored of batch sample k
    State state = State::Free;
    int64_t ticket = -1;
    int parts = 0, claimed = 0, done = 0;
    double t_start = 0;  // seconds, steady clock
  };

  void worker();
  void read_batch(std::unique_lock<std::mutex>& lk);    // called with mu_ held
  void decode_part(std::unique_lock<std::mutex>& lk, SampleDecoder& dec);  // called with mu_ held
  bool can_read() const;
  Slot* decodable();
  void fail(std::exception_ptr e);  // with mu_ held
  void release_locked();

  const Dataset& data_;
  Sampler plan_;  // used by the one reading thread only
  PrefetchOptions opt_;
  InputTransform transform_;
  NormalizeTable norm_;
  int threads_, depth_;
  int64_t b_, c_, h_, w_, part_samples_;
  int64_t end_ticket_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;   // workers: a free buffer, decode work, stop
  std::condition_variable ready_cv_;  // consumer: a full buffer, an error, stop
  std::vector<Slot> slots_;
  std::deque<int> free_;             // free queue (slot ids)
  std::deque<int> decoding_;         // slots with decode parts, ticket order
  std::map<int64_t, int> full_;      // full queue: ticket → slot
  int held_ = -1;                    // slot held by the consumer
  bool reading_ = false, stop_ = false;
  int64_t next_ticket_ = 0, next_deliver_ = 0;
  std::exception_ptr error_;
  PrefetchStats stats_;
  std::vector<std::thread> workers_;
};

}  // namespace dtrain::io
