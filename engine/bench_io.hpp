// engine/bench_io.hpp — `dtrain bench io`: the loader's numbers (bench/README.md, "Loader").
//
//   dtrain bench io --data F [--minibatch B] [--threads T] [--depth D]
//                   [--compute-ms X] [--steps N] [--pad P] [--flip] [--spin]
//     1. loader alone: images/s of io::Prefetcher when the consumer never
//        computes, with the mean read / produce time per batch and the read
//        amplification of Hdf5Dataset;
//     2. with --compute-ms X > 0: each step also "computes" X ms (sleep, or a busy
//        spin with --spin); prints the exposed I/O wait per step (mean after 3
//        warm-up steps) and its share of the step time — the paper's T_O from I/O.
//   dtrain bench io --chunking [--n N] [--shape HxWxC] [--minibatch B] [--dir D]
//     random-batch reads (no prefetcher) of two synthetic files that differ only
//     in the chunk layout: one sample per chunk vs the writer's default
//     (≥ 64 samples, ~512 KiB per chunk); cold (page cache dropped with
//     posix_fadvise) and warm; prints samples/s of each and the ratio.
// Both end with one JSON line ("json: {...}") for scripts. Returns the exit
// code; bad option values are UsageErrors naming the option.
#pragma once

#include <string>
#include <vector>

namespace dtrain::engine {

int cmd_bench_io(const std::vector<std::string>& args);

}  // namespace dtrain::engine
