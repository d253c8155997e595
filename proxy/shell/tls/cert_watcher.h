// Certificate rotation without a restart (docs/tls.md "Rotating
// certificates"): the certificate, key and CA files of every listener and
// upstream with a `tls` block are watched through inotify (uv_fs_event) on
// the directories that hold them, since editors, cert-manager and
// Kubernetes secret volumes replace files by renaming into the directory
// rather than writing into the file. A change is checked a short moment
// later (writes come in bursts): when a context's files read differently
// than before, the context loads them again; a set that loads is used for
// new handshakes, one that does not keeps the old set and is logged with
// the reason. Runs on the server's loop thread.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "shell/tls/tls_contexts.h"

namespace onelayer {

class CertWatcher {
 public:
  // How long after the first change in a burst the files are read.
  static constexpr uint64_t kSettleMs = 100;

  explicit CertWatcher(uv_loop_t* loop);
  ~CertWatcher();  // close() first; handles still closing free themselves
  CertWatcher(const CertWatcher&) = delete;
  CertWatcher& operator=(const CertWatcher&) = delete;

  // Watches the files of every context in `tls` (by index into cfg's
  // listeners and upstreams) instead of what was watched before.
  void watch(const Config& cfg, const TlsContexts& tls);
  // Stops watching; every handle is closed on the loop's next turns.
  void close();

  // Rotations done and refused since start (for logs and tests).
  uint64_t rotations() const { return rotations_; }
  uint64_t refusals() const { return refusals_; }

 private:
  struct Entry {
    std::string what;  // "listener inbound", "upstream inventory"
    std::vector<std::string> files;
    uint64_t fingerprint = 0;  // of the files' contents when last loaded or tried
    std::function<bool(std::string*)> reload;
  };
  struct Dir;

  void unwatch_dirs();
  void changed();
  void check();

  uv_loop_t* loop_;
  uv_timer_t* timer_ = nullptr;  // owned; freed in its close callback
  std::vector<Entry> entries_;
  std::vector<Dir*> dirs_;  // owned; each freed in its close callback
  uint64_t rotations_ = 0;
  uint64_t refusals_ = 0;
  bool closed_ = false;
};

// A hash of the files' contents, in order (a file that cannot be read
// counts as its error): equal sets read equal, a changed byte differs.
uint64_t files_fingerprint(const std::vector<std::string>& files);

}  // namespace onelayer
