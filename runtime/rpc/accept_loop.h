/// \file The listen/accept loop the device server and the tracker share, with the connection counts
/// that bound what unauthenticated peers can cost.
///
/// Each accepted connection runs on its own thread. A connection is *unauthenticated* from accept
/// until its handler calls Admission::authenticated() (after HELLO verified); while
/// `max_unauthenticated` connections are in that state the loop stops accepting, so further peers wait
/// in the kernel's listen backlog instead of costing threads, and every handler bounds that state with
/// its handshake deadline. A flood of silent connections therefore costs at most max_unauthenticated
/// threads for at most one deadline each.
#pragma once
#include <atomic>
#include <functional>
#include <memory>

#include "runtime/rpc/net.h"

namespace kiln::rpc {

/// Live connection counts of one listener, shared with connection threads that may outlive the loop.
struct ConnectionCounts {
  std::atomic<int> open{0};             // accepted and not yet closed
  std::atomic<int> unauthenticated{0};  // of those, not past the handshake
};

/// A connection's place in the counts: it counts as open and unauthenticated until authenticated()
/// (idempotent); destruction (the handler returning) takes it out of both.
class Admission {
 public:
  explicit Admission(std::shared_ptr<ConnectionCounts> counts);
  Admission(Admission&& o) noexcept : counts_(std::move(o.counts_)), authenticated_(o.authenticated_) {}
  Admission(const Admission&) = delete;
  Admission& operator=(const Admission&) = delete;
  Admission& operator=(Admission&&) = delete;
  ~Admission();
  void authenticated();
  /// Open connections, this one included.
  int open() const { return counts_->open.load(); }

 private:
  std::shared_ptr<ConnectionCounts> counts_;
  bool authenticated_ = false;
};

/// Accepts on `listener` until `stop` is set (checked every 100 ms) and runs handle(conn, admission)
/// on a detached thread per connection; pauses accepting while counts->unauthenticated is at
/// max_unauthenticated (> 0). SIGPIPE is ignored from here on.
void accept_loop(int listener, const std::atomic<bool>& stop, const std::shared_ptr<ConnectionCounts>& counts,
                 int max_unauthenticated, std::function<void(Fd, Admission)> handle);

}  // namespace kiln::rpc
