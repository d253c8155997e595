// A connection whose output may wait for the end of the worker's I/O phase.
// Bytes queued for it while the worker is inside a read callback are
// written once, by the worker's check handle after the poll that read them,
// instead of once per event (one read of responses ends many streams).
#pragma once

namespace onelayer {

class DeferredWriter {
 public:
  // Writes what is queued (the worker calls it once per queueing).
  virtual void write_deferred() = 0;

 protected:
  ~DeferredWriter() = default;

 private:
  friend class ConnectionHost;
  bool write_deferred_queued_ = false;
};

}  // namespace onelayer
