// io/prefetcher.cpp — worker threads, free/full queues and in-order delivery
// (the protocol is written out in prefetcher.hpp).
#include "io/prefetcher.hpp"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <new>

#include "core/error.hpp"
#include "core/settings.hpp"

namespace dtrain::io {

namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double thread_cpu_s() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}
constexpr std::align_val_t kAlign{64};
}  // namespace

namespace {
InputTransform make_transform(const Dataset& data, const PrefetchOptions& o) {
  InputTransform t;
  t.input = o.input;
  if (t.input.h <= 0) {
    const auto fixed = data.fixed_shape();
    DT_CHECK(fixed.has_value(), data.path(), ": a ", layout_name(data.layout()),
             " file has images of many sizes: PrefetchOptions::input must give the network input");
    t.input = *fixed;
  }
  t.resize = o.resize;
  t.augment = o.augment;
  t.train = true;
  t.dct_scaling = o.dct_scaling;
  t.fit_raw = o.fit_raw;
  check_transform(data, t);
  return t;
}
}  // namespace

int default_loader_threads(int ranks_on_host) {
  long per_rank = 0;
  if (auto c = settings::slurm_cpus_per_task(); c && *c > 0) {
    per_rank = *c;
  } else {
    long hw = long(std::thread::hardware_concurrency());
    per_rank = std::max(1L, hw / std::max(1, ranks_on_host));
  }
  return int(std::clamp(per_rank, 1L, long(kMaxDefaultLoaderThreads)));
}

TaskCpuSplit split_task_cpus(long cpus, bool gpu) {
  DT_CHECK(cpus >= 1, "split_task_cpus: ", cpus, " CPUs");
  if (cpus == 1) return {1, 1};
  const long loaders = gpu ? std::min(cpus - 1, long(kMaxDefaultLoaderThreads))
                           : std::clamp(cpus / 4, 1L, long(kMaxDefaultLoaderThreads));
  return {int(gpu ? 1 : cpus - loaders), int(loaders)};
}

Prefetcher::Prefetcher(const Dataset& data, Sampler plan, PrefetchOptions options)
    : data_(data),
      plan_(std::move(plan)),
      opt_(std::move(options)),
      transform_(make_transform(data, opt_)),
      norm_(transform_.input.c, opt_.mean, opt_.std),
      threads_(opt_.threads > 0 ? opt_.threads : default_loader_threads(1)),
      depth_(opt_.depth),
      b_(plan_.minibatch()),
      c_(transform_.input.c),
      h_(transform_.input.h),
      w_(transform_.input.w) {
  DT_CHECK(depth_ >= 1, "prefetch depth must be >= 1, got ", depth_);
  DT_CHECK(opt_.augment.pad >= 0, "crop padding must be >= 0, got ", opt_.augment.pad);
  DT_CHECK(plan_.n() <= data.n(), data.path(), ": the sampler covers ", plan_.n(),
           " samples but the file holds ", data.n());
  DT_CHECK(opt_.start_epoch >= 0 && opt_.start_step >= 0 &&
               opt_.start_step < plan_.steps_per_epoch(),
           "start (epoch ", opt_.start_epoch, ", step ", opt_.start_step, ") outside the plan of ",
           plan_.steps_per_epoch(), " steps per epoch");
  end_ticket_ = opt_.total_batches < 0 ? INT64_MAX : opt_.total_batches;
  // Decode parts: about two per thread per batch, for load balance.
  part_samples_ = std::max<int64_t>(1, (b_ + 2 * threads_ - 1) / (2 * threads_));

  auto alloc = [this](size_t bytes) -> void* {
    if (opt_.allocator.allocate) return opt_.allocator.allocate(bytes);
    return ::operator new(bytes, kAlign);
  };
  slots_.resize(size_t(depth_) + 1);
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    s.batch.size = b_;
    s.batch.x = static_cast<float*>(alloc(size_t(b_ * c_ * h_ * w_) * sizeof(float)));
    s.batch.labels = static_cast<int32_t*>(alloc(size_t(b_) * sizeof(int32_t)));
    DT_CHECK(s.batch.x && s.batch.labels, "batch buffer allocation failed");
    free_.push_back(int(i));
  }
  try {
    for (int t = 0; t < threads_; ++t) workers_.emplace_back([this] { worker(); });
  } catch (...) {
    stop();
    throw;
  }
}

Prefetcher::~Prefetcher() {
  stop();
  for (Slot& s : slots_) {
    for (void* p : {static_cast<void*>(s.batch.x), static_cast<void*>(s.batch.labels)}) {
      if (!p) continue;
      if (opt_.allocator.release)
        opt_.allocator.release(p);
      else
        ::operator delete(p, kAlign);
    }
  }
}

void Prefetcher::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  ready_cv_.notify_all();
  for (auto& t : workers_)
    if (t.joinable()) t.join();
  workers_.clear();
}

bool Prefetcher::can_read() const {
  return !reading_ && !free_.empty() && next_ticket_ < end_ticket_;
}

Prefetcher::Slot* Prefetcher::decodable() {
  for (int id : decoding_) {
    Slot& s = slots_[size_t(id)];
    if (s.claimed < s.parts) return &s;
  }
  return nullptr;
}

void Prefetcher::fail(std::exception_ptr e) {
  if (!error_) error_ = e;
  stop_ = true;  // the other workers leave; next() rethrows error_
  work_cv_.notify_all();
  ready_cv_.notify_all();
}

void Prefetcher::worker() {
  std::unique_ptr<SampleDecoder> dec;  // this thread's scratch buffers and JPEG handle
  try {
    dec = std::make_unique<SampleDecoder>(data_, transform_, norm_, opt_.seed);
  } catch (...) {
    std::lock_guard<std::mutex> g(mu_);
    fail(std::current_exception());
    return;
  }
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    work_cv_.wait(lk, [this] { return stop_ || can_read() || decodable() != nullptr; });
    if (stop_) return;
    // Keep the serialised reads busy while fewer than T batches wait for decoding.
    const bool read_first = can_read() && int(decoding_.size()) < threads_;
    try {
      if (read_first || decodable() == nullptr)
        read_batch(lk);
      else
        decode_part(lk, *dec);
    } catch (...) {
      if (!lk.owns_lock()) lk.lock();
      fail(std::current_exception());
      return;
    }
  }
}

void Prefetcher::read_batch(std::unique_lock<std::mutex>& lk) {
  const int id = free_.front();
  free_.pop_front();
  Slot& s = slots_[size_t(id)];
  s.state = State::Reading;
  s.ticket = next_ticket_++;
  reading_ = true;
  const int64_t steps = plan_.steps_per_epoch();
  const int64_t pos = opt_.start_step + s.ticket;
  s.batch.epoch = opt_.start_epoch + pos / steps;
  s.batch.step = pos % steps;
  s.t_start = now_s();
  if (opt_.injected_read_delay_s > 0)  // a stop() interrupts the injected cost
    work_cv_.wait_for(lk, std::chrono::duration<double>(opt_.injected_read_delay_s),
                      [this] { return stop_; });
  if (stop_) {
    reading_ = false;
    return;
  }
  lk.unlock();

  // Only this thread reads now: the Sampler and the raw buffer are ours.
  if (opt_.test_before_read) opt_.test_before_read(s.batch.epoch, s.batch.step);
  s.batch.indices = plan_.batch(s.batch.epoch, s.batch.step);
  s.sorted = s.batch.indices;
  std::sort(s.sorted.begin(), s.sorted.end());
  s.sorted.erase(std::unique(s.sorted.begin(), s.sorted.end()), s.sorted.end());
  s.pos.resize(size_t(b_));
  for (int64_t k = 0; k < b_; ++k)
    s.pos[size_t(k)] = std::lower_bound(s.sorted.begin(), s.sorted.end(), s.batch.indices[size_t(k)]) -
                       s.sorted.begin();
  data_.read_stored(s.sorted, s.stored);  // sorted and distinct: read in place
  const std::vector<int32_t>& labels = data_.labels();
  for (int64_t i = 0; i < b_; ++i) s.batch.labels[i] = labels[size_t(s.batch.indices[size_t(i)])];
  const double read_s = now_s() - s.t_start;

  lk.lock();
  reading_ = false;
  s.batch.read_s = read_s;
  stats_.read_s += read_s;
  s.state = State::Decoding;
  s.parts = int((b_ + part_samples_ - 1) / part_samples_);
  s.claimed = s.done = 0;
  decoding_.push_back(id);
  work_cv_.notify_all();
}

void Prefetcher::decode_part(std::unique_lock<std::mutex>& lk, SampleDecoder& dec) {
  Slot& s = *decodable();
  const int part = s.claimed++;
  lk.unlock();

  const double t0 = now_s(), c0 = thread_cpu_s();
  const int64_t begin = part * part_samples_, end = std::min(b_, begin + part_samples_);
  const int64_t chw = c_ * h_ * w_;
  for (int64_t i = begin; i < end; ++i) {
    const int64_t index = s.batch.indices[size_t(i)];
    if (opt_.test_before_decode) opt_.test_before_decode(index);
    const size_t k = size_t(s.pos[size_t(i)]);
    dec.decode(index, s.batch.epoch, s.stored.data(k), s.stored.size(k), s.batch.x + i * chw);
  }
  const double secs = now_s() - t0, cpu = thread_cpu_s() - c0;

  lk.lock();
  stats_.decode_s += secs;
  stats_.decode_cpu_s += cpu;
  stats_.decoded += end - begin;
  if (++s.done < s.parts) return;
  const int id = int(&s - slots_.data());
  decoding_.erase(std::find(decoding_.begin(), decoding_.end(), id));
  s.state = State::Ready;
  s.batch.produce_s = now_s() - s.t_start;
  stats_.produce_s += s.batch.produce_s;
  stats_.produced += 1;
  full_.emplace(s.ticket, id);
  ready_cv_.notify_all();
}

void Prefetcher::release_locked() {
  if (held_ < 0) return;
  slots_[size_t(held_)].state = State::Free;
  free_.push_back(held_);
  held_ = -1;
  work_cv_.notify_all();
}

void Prefetcher::release() {
  std::lock_guard<std::mutex> lk(mu_);
  release_locked();
}

const Batch& Prefetcher::next() {
  std::unique_lock<std::mutex> lk(mu_);
  release_locked();
  if (error_) std::rethrow_exception(error_);
  DT_CHECK(!stop_, "Prefetcher::next() after stop()");
  DT_CHECK(next_deliver_ < end_ticket_, "Prefetcher::next(): all ", end_ticket_,
           " batches were delivered");
  const double t0 = now_s();
  ready_cv_.wait(lk, [this] { return stop_ || error_ || full_.count(next_deliver_) > 0; });
  if (error_) std::rethrow_exception(error_);
  DT_CHECK(!stop_, "Prefetcher::next(): stopped while waiting");
  auto it = full_.find(next_deliver_);
  held_ = it->second;
  full_.erase(it);
  ++next_deliver_;
  Slot& s = slots_[size_t(held_)];
  s.state = State::Held;
  s.batch.wait_s = now_s() - t0;
  stats_.batches += 1;
  stats_.io_wait_s += s.batch.wait_s;
  return s.batch;
}

PrefetchStats Prefetcher::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

}  // namespace dtrain::io
