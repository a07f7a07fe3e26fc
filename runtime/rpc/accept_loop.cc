// The shared accept loop: admission counting and a pause while too many handshakes are in flight.
#include "runtime/rpc/accept_loop.h"

#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

namespace kiln::rpc {

Admission::Admission(std::shared_ptr<ConnectionCounts> counts) : counts_(std::move(counts)) {
  ++counts_->open;
  ++counts_->unauthenticated;
}

Admission::~Admission() {
  if (!counts_) return;  // moved from
  if (!authenticated_) --counts_->unauthenticated;
  --counts_->open;
}

void Admission::authenticated() {
  if (authenticated_) return;
  authenticated_ = true;
  --counts_->unauthenticated;
}

void accept_loop(int listener, const std::atomic<bool>& stop, const std::shared_ptr<ConnectionCounts>& counts,
                 int max_unauthenticated, std::function<void(Fd, Admission)> handle) {
  signal(SIGPIPE, SIG_IGN);
  auto shared_handle = std::make_shared<std::function<void(Fd, Admission)>>(std::move(handle));
  while (!stop) {
    if (max_unauthenticated > 0 && counts->unauthenticated.load() >= max_unauthenticated) {
      usleep(10000);  // handshakes end within their deadline; the backlog holds newcomers meanwhile
      continue;
    }
    if (wait_readable(listener, 100) <= 0) continue;
    Fd conn(accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn.valid()) {
      // Out of descriptors (EMFILE) leaves the connection in the backlog and the listener readable:
      // back off instead of spinning until some connection closes.
      usleep(10000);
      continue;
    }
    Admission admission(counts);
    std::thread([h = shared_handle, c = std::move(conn), a = std::move(admission)]() mutable {
      (*h)(std::move(c), std::move(a));
    }).detach();
  }
}

}  // namespace kiln::rpc
