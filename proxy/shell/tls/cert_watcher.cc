#include "shell/tls/cert_watcher.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

namespace onelayer {

struct CertWatcher::Dir {
  uv_fs_event_t handle{};
  CertWatcher* owner = nullptr;  // null once unwatched
  std::string path;
};

namespace {

// FNV-1a, 64 bits: enough to tell one version of a file from the next.
uint64_t fnv1a(uint64_t h, const char* data, size_t len) {
  for (size_t i = 0; i < len; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 1099511628211ull;
  }
  return h;
}

std::string dir_of(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// The directories to watch for `file`: its own, and the one its target is
// in when it is a symbolic link elsewhere (a Kubernetes secret volume's
// files link through a `..data` link that is renamed on update).
void add_dirs(const std::string& file, std::vector<std::string>& out) {
  auto add = [&](const std::string& d) {
    if (std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
  };
  add(dir_of(file));
  char real[PATH_MAX];
  if (realpath(file.c_str(), real) != nullptr) add(dir_of(real));
}

}  // namespace

uint64_t files_fingerprint(const std::vector<std::string>& files) {
  uint64_t h = 14695981039346656037ull;
  for (const std::string& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) {
      const std::string why = "unreadable: " + std::string(std::strerror(errno));
      h = fnv1a(h, why.data(), why.size());
    } else {
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      h = fnv1a(h, text.data(), text.size());
    }
    h = fnv1a(h, "\0", 1);  // a boundary between files
  }
  return h;
}

CertWatcher::CertWatcher(uv_loop_t* loop) : loop_(loop) {
  timer_ = new uv_timer_t;
  uv_timer_init(loop_, timer_);
  timer_->data = this;
}

CertWatcher::~CertWatcher() {
  close();
}

void CertWatcher::close() {
  if (closed_) return;
  closed_ = true;
  unwatch_dirs();
  entries_.clear();
  timer_->data = nullptr;
  uv_close(reinterpret_cast<uv_handle_t*>(timer_), [](uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); });
  timer_ = nullptr;
}

void CertWatcher::unwatch_dirs() {
  for (Dir* d : dirs_) {
    d->owner = nullptr;
    uv_close(reinterpret_cast<uv_handle_t*>(&d->handle), [](uv_handle_t* h) {
      delete static_cast<Dir*>(h->data);
    });
  }
  dirs_.clear();
}

void CertWatcher::watch(const Config& cfg, const TlsContexts& tls) {
  if (closed_) return;
  unwatch_dirs();
  entries_.clear();
  for (size_t i = 0; i < tls.listeners.size() && i < cfg.listeners.size(); ++i) {
    std::shared_ptr<TlsServerContext> ctx = tls.listeners[i];
    if (!ctx) continue;
    entries_.push_back(Entry{"listener " + cfg.listeners[i].name, ctx->files(), 0,
                             [ctx](std::string* error) { return ctx->reload_files(error); }});
  }
  for (size_t i = 0; i < tls.upstreams.size() && i < cfg.upstreams.size(); ++i) {
    std::shared_ptr<TlsClientContext> ctx = tls.upstreams[i];
    if (!ctx || ctx->files().empty()) continue;  // the system store only: nothing of ours to watch
    entries_.push_back(Entry{"upstream " + cfg.upstreams[i].name, ctx->files(), 0,
                             [ctx](std::string* error) { return ctx->reload_files(error); }});
  }
  std::vector<std::string> dirs;
  for (Entry& e : entries_) {
    e.fingerprint = files_fingerprint(e.files);
    for (const std::string& f : e.files) add_dirs(f, dirs);
  }
  for (const std::string& path : dirs) {
    auto* d = new Dir;
    d->owner = this;
    d->path = path;
    if (int rc = uv_fs_event_init(loop_, &d->handle); rc != 0) {
      spdlog::warn("tls: cannot watch {} for certificate changes: {}", path, uv_strerror(rc));
      delete d;
      continue;
    }
    d->handle.data = d;
    dirs_.push_back(d);  // closed (and freed) with the others, started or not
    int rc = uv_fs_event_start(
        &d->handle,
        [](uv_fs_event_t* h, const char*, int, int status) {
          auto* dir = static_cast<Dir*>(h->data);
          if (dir->owner == nullptr) return;
          if (status < 0) spdlog::warn("tls: watching {}: {}", dir->path, uv_strerror(status));
          dir->owner->changed();
        },
        path.c_str(), 0);
    if (rc != 0) {
      spdlog::warn("tls: cannot watch {} for certificate changes: {} (a reload still loads them)", path,
                   uv_strerror(rc));
    }
  }
  if (!entries_.empty())
    spdlog::info("tls: watching {} director{} for certificate, key and CA changes", dirs.size(),
                 dirs.size() == 1 ? "y" : "ies");
}

void CertWatcher::changed() {
  if (closed_ || uv_is_active(reinterpret_cast<uv_handle_t*>(timer_))) return;  // a check is due already
  uv_timer_start(timer_, [](uv_timer_t* t) {
    if (auto* self = static_cast<CertWatcher*>(t->data)) self->check();
  }, kSettleMs, 0);
}

void CertWatcher::check() {
  for (Entry& e : entries_) {
    uint64_t now = files_fingerprint(e.files);
    if (now == e.fingerprint) continue;
    e.fingerprint = now;  // a set that fails is not tried again until it changes
    std::string error;
    if (e.reload(&error)) {
      ++rotations_;
      spdlog::info("tls: {}: certificate files changed; new handshakes use them", e.what);
    } else {
      ++refusals_;
      spdlog::error("tls: {}: changed certificate files not used, the previous ones stay: {}", e.what, error);
    }
  }
}

}  // namespace onelayer
