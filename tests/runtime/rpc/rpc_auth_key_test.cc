// Where the auth key comes from and when a listener may run without one: each way a key file or
// $KILN_RPC_AUTH_KEY is refused, and the loopback-only rule for the server and the tracker.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>

#include "runtime/rpc/auth_key.h"
#include "runtime/rpc/rpc_server.h"
#include "runtime/rpc/tracker.h"
#include "tests/runtime/rpc/rpc_test_util.h"

namespace kiln::rpc::test {
namespace {

// Unsets $KILN_RPC_AUTH_KEY for one test and puts back what was there.
class AuthKeyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* v = getenv(kAuthKeyEnv)) saved_ = v, had_ = true;
    unsetenv(kAuthKeyEnv);
  }
  void TearDown() override {
    if (had_) setenv(kAuthKeyEnv, saved_.c_str(), 1);
    else unsetenv(kAuthKeyEnv);
  }
  std::string file(const std::string& name, const std::string& contents, mode_t mode = 0600) {
    std::string path = dir_.path() + "/" + name;
    std::ofstream(path, std::ios::binary) << contents;
    chmod(path.c_str(), mode);
    return path;
  }
  // load_auth_key's error for a key file, "" when it loaded.
  std::string load_error(const std::string& path) {
    std::string key, error;
    return load_auth_key(path, &key, &error) ? "" : error;
  }
  TempDir dir_;
  std::string saved_;
  bool had_ = false;
};

TEST_F(AuthKeyTest, KeyFileLosesOneTrailingNewline) {
  std::string key, error;
  ASSERT_TRUE(load_auth_key(file("lf", "0123456789abcdef\n"), &key, &error)) << error;
  EXPECT_EQ(key, "0123456789abcdef");
  ASSERT_TRUE(load_auth_key(file("crlf", "0123456789abcdef\r\n"), &key, &error)) << error;
  EXPECT_EQ(key, "0123456789abcdef");
  ASSERT_TRUE(load_auth_key(file("bare", "0123456789abcdef  "), &key, &error)) << error;
  EXPECT_EQ(key, "0123456789abcdef  ") << "only a line end is dropped; other bytes are key";
}

TEST_F(AuthKeyTest, NoFileAndNoEnvironmentMeansNoKey) {
  std::string key = "stale", error;
  ASSERT_TRUE(load_auth_key("", &key, &error)) << error;
  EXPECT_TRUE(key.empty());
  setenv(kAuthKeyEnv, "from the environment", 1);
  ASSERT_TRUE(load_auth_key("", &key, &error)) << error;
  EXPECT_EQ(key, "from the environment");
}

TEST_F(AuthKeyTest, FileWinsOverTheEnvironment) {
  setenv(kAuthKeyEnv, "from the environment", 1);
  std::string key, error;
  ASSERT_TRUE(load_auth_key(file("k", "from the key file!"), &key, &error)) << error;
  EXPECT_EQ(key, "from the key file!");
}

TEST_F(AuthKeyTest, MissingFileIsRefused) {
  EXPECT_NE(load_error(dir_.path() + "/nope").find("cannot read auth key file"), std::string::npos);
}

TEST_F(AuthKeyTest, DirectoryIsRefused) {
  EXPECT_NE(load_error(dir_.path()).find("not a regular file"), std::string::npos);
}

TEST_F(AuthKeyTest, FileOthersCanReadIsRefused) {
  EXPECT_NE(load_error(file("g", "0123456789abcdef", 0640)).find("readable by others"), std::string::npos);
  EXPECT_NE(load_error(file("o", "0123456789abcdef", 0604)).find("readable by others"), std::string::npos);
}

TEST_F(AuthKeyTest, ShortKeyIsRefused) {
  EXPECT_NE(load_error(file("short", "fifteen bytes!!")).find("at least 16"), std::string::npos);
  EXPECT_NE(load_error(file("empty", "")).find("at least 16"), std::string::npos);
  setenv(kAuthKeyEnv, "short", 1);
  std::string key, error;
  EXPECT_FALSE(load_auth_key("", &key, &error));
  EXPECT_NE(error.find(kAuthKeyEnv), std::string::npos) << error;
}

TEST_F(AuthKeyTest, OverlongKeyIsRefused) {
  EXPECT_NE(load_error(file("long", std::string(kMaxAuthKeyBytes + 1, 'k'))).find("longer than"), std::string::npos);
  EXPECT_EQ(load_error(file("max", std::string(kMaxAuthKeyBytes, 'k'))), "");
}

TEST_F(AuthKeyTest, LoopbackIsTheOnlyAddressWithoutAKey) {
  std::string error;
  EXPECT_TRUE(check_listen_policy("127.0.0.1", "", &error));
  EXPECT_TRUE(check_listen_policy("127.3.2.1", "", &error));
  EXPECT_TRUE(check_listen_policy("::1", "", &error));
  for (const char* host : {"0.0.0.0", "::", "", "192.0.2.7"}) {
    EXPECT_FALSE(check_listen_policy(host, "", &error)) << host;
    EXPECT_NE(error.find("--auth-key-file"), std::string::npos) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << "not one line: " << error;
  }
  EXPECT_TRUE(check_listen_policy("0.0.0.0", "0123456789abcdef", &error));
}

TEST_F(AuthKeyTest, TrackerAndServerRefuseAWildcardBindWithoutAKey) {
  TrackerOptions t;
  t.host = "0.0.0.0";
  t.port = 0;
  std::string error;
  EXPECT_FALSE(Tracker(t).listen(&error));
  EXPECT_NE(error.find("auth key"), std::string::npos) << error;
  ServerOptions s;
  s.host = "0.0.0.0";
  s.port = 0;
  EXPECT_FALSE(RpcServer(s).listen(&error));
  EXPECT_NE(error.find("auth key"), std::string::npos) << error;
  // The commands' entry points: exit code 2 and one line, before anything listens.
  testing::internal::CaptureStderr();
  int rc = run_tracker(t);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_NE(err.find("kiln tracker: refusing to listen on '0.0.0.0'"), std::string::npos) << err;
  // A key that fails to load is exit code 2 as well, not a keyless start.
  t.host = "127.0.0.1";
  t.auth_key_file = dir_.path() + "/nope";
  testing::internal::CaptureStderr();
  rc = run_tracker(t);
  err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 2);
  EXPECT_NE(err.find("cannot read auth key file"), std::string::npos) << err;
}

}  // namespace
}  // namespace kiln::rpc::test
