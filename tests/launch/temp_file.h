// A file with given contents for the launcher's unit tests, removed at the end of the test.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>
#include <string_view>

namespace hoop::launch::testing {

class TempFile {
 public:
  explicit TempFile(std::string_view text) {
    char path[] = "/tmp/hoop-launch-test-XXXXXX";
    const int fd = ::mkstemp(path);
    EXPECT_GE(fd, 0);
    path_ = path;
    EXPECT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    ::close(fd);
  }
  ~TempFile() { remove(); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  const std::string& path() const { return path_; }
  /// Removes the file early, to see what reading a missing one says.
  void remove() const { ::unlink(path_.c_str()); }

 private:
  std::string path_;
};

}  // namespace hoop::launch::testing
