// Auth key loading and the listen policy.
#include "runtime/rpc/auth_key.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/rpc/net.h"

namespace kiln::rpc {

namespace {

bool check_length(const std::string& key, const std::string& where, std::string* error) {
  if (key.size() < kMinAuthKeyBytes)
    return *error = "auth key from " + where + " is " + std::to_string(key.size()) + " bytes; at least " +
                    std::to_string(kMinAuthKeyBytes) + " are needed",
           false;
  if (key.size() > kMaxAuthKeyBytes)
    return *error = "auth key from " + where + " is longer than " + std::to_string(kMaxAuthKeyBytes) + " bytes", false;
  return true;
}

}  // namespace

bool load_auth_key(const std::string& key_file, std::string* key, std::string* error) {
  key->clear();
  if (key_file.empty()) {
    const char* env = getenv(kAuthKeyEnv);
    if (!env || !*env) return true;
    *key = env;
    return check_length(*key, std::string("$") + kAuthKeyEnv, error);
  }
  Fd fd(open(key_file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return *error = "cannot read auth key file " + key_file + ": " + strerror(errno), false;
  struct stat st;
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return *error = "auth key file " + key_file + " is not a regular file", false;
  if (st.st_mode & 077)
    return *error = "auth key file " + key_file + " is readable by others (chmod 600 it)", false;
  char buf[512];
  for (;;) {
    ssize_t n = read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return *error = "cannot read auth key file " + key_file + ": " + strerror(errno), false;
    if (n == 0) break;
    key->append(buf, static_cast<size_t>(n));
    if (key->size() > kMaxAuthKeyBytes + 2) break;
  }
  if (!key->empty() && key->back() == '\n') key->pop_back();
  if (!key->empty() && key->back() == '\r') key->pop_back();
  return check_length(*key, key_file, error);
}

bool is_loopback_host(const std::string& host) {
  if (host.empty()) return false;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), "0", &hints, &res) != 0 || !res) return false;
  bool all = true;
  for (addrinfo* a = res; a; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      uint32_t ip = ntohl(reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr.s_addr);
      all = all && (ip >> 24) == 127;
    } else if (a->ai_family == AF_INET6) {
      all = all && IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr);
    } else {
      all = false;
    }
  }
  freeaddrinfo(res);
  return all;
}

bool check_listen_policy(const std::string& host, const std::string& key, std::string* error) {
  if (!key.empty() || is_loopback_host(host)) return true;
  *error = "refusing to listen on '" + host + "' without an auth key (anyone who reaches it could run code here): " +
           "give --auth-key-file FILE or set " + kAuthKeyEnv + ", or listen on 127.0.0.1";
  return false;
}

}  // namespace kiln::rpc
