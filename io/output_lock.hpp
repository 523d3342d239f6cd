// io/output_lock.hpp — one converter per output file, and what a stopped one
// left beside it (the `dtrain data` converters: fashion-mnist, synth,
// imagefolder).
//
// OutputLock: F.lock, flock'ed for the whole conversion, so a second
// converter of the same F (a requeued job overlapping its predecessor, two
// shells) stops with exit 2 instead of writing beside — or resuming from a
// partial file of — the first; the holder writes its command, pid and host
// into the file and the refusal quotes them. The kernel drops the lock when
// its holder dies (even by SIGKILL), so a killed run never blocks the next;
// the holder removes the file when it ends.
//
// remove_stale_temporaries: "F.tmp.<digits>" beside F is what a converter
// stopped while it wrote F left (H5TempFile's and the jpeg store's temporary
// names; Ctrl-C or a killed job never reaches their cleanup). Call it with
// F's own OutputLock held: then no running converter is writing any of them.
#pragma once

#include <string>

namespace dtrain::io {

class OutputLock {
 public:
  // Takes out + ".lock" (creating it). who: this command, written into it.
  // Throws UsageError (exit 2) when another process holds it, or when it
  // cannot be created ("option 'out': …").
  OutputLock(const std::string& out, const std::string& who);
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

// Removes every "<out>.tmp.<digits>" in out's folder, logging each (who: the
// command, for the line). Returns how many. Errors removing one are ignored
// (the name says it is partial).
int remove_stale_temporaries(const std::string& out, const std::string& who);

}  // namespace dtrain::io
