// engine/bench_io.hpp — `dtrain bench io`: the loader's numbers (bench/README.md, "Loader").
//
//   dtrain bench io --data F [--minibatch B] [--threads T] [--depth D]
//                   [--compute-ms X] [--steps N] [--pad P] [--flip] [--spin]
//                   [--augment none|crop|rrc] [--input HxW[xC]] [--eval-resize R]
//                   [--dct-scaling true|false]
//     F: a raw or jpeg file (io::open_dataset); the network input is --input
//     (default: a raw file's shape, 224x224 for jpeg), the transform that of
//     `dtrain train` (docs/data-formats.md, "The loader").
//     1. loader alone: images/s of io::Prefetcher when the consumer never
//        computes, with the mean read / produce time per batch, the decode
//        rate per thread (wall, and CPU ms per image: JPEG decode, crop,
//        resize, flip, normalise) and the read amplification;
//     2. with --compute-ms X > 0: each step also "computes" X ms (sleep, or a busy
//        spin with --spin); prints the exposed I/O wait per step (mean after 3
//        warm-up steps) and its share of the step time — the paper's T_O from
//        I/O —, the steps that waited > 1 ms and the slowest batch's read and
//        read-to-ready times (a stall of the machine shows there).
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
