#include "storage/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace inac::storage {

namespace {

std::string ReadHolder(int fd) {
  char buffer[64] = {};
  ssize_t n = pread(fd, buffer, sizeof(buffer) - 1, 0);
  if (n <= 0) return "";
  std::string text(buffer, n);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace

absl::StatusOr<std::unique_ptr<FileLock>> FileLock::Acquire(const std::string& path,
                                                            const std::string& what) {
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    int err = errno;
    std::string message =
        absl::StrCat("cannot create lock file ", path, " for ", what, ": ", std::strerror(err));
    if (err == EACCES || err == EPERM || err == EROFS) return absl::PermissionDeniedError(message);
    if (err == ENOENT || err == ENOTDIR) return absl::FailedPreconditionError(message);
    return absl::InternalError(message);
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    std::string holder = ReadHolder(fd);
    close(fd);
    if (err == EWOULDBLOCK) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, " is in use by another controller (lock file ", path, " is held",
          holder.empty() ? "" : absl::StrCat(" by pid ", holder), "); refusing to open it"));
    }
    return absl::InternalError(
        absl::StrCat("cannot lock ", path, " for ", what, ": ", std::strerror(err)));
  }
  // Record the holder for the message above; best effort (the lock, not the content, is the guard).
  std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(fd, 0) == 0) {
    [[maybe_unused]] ssize_t n = pwrite(fd, pid.data(), pid.size(), 0);
  }
  return std::unique_ptr<FileLock>(new FileLock(path, fd));
}

FileLock::~FileLock() {
  // Closing the descriptor releases the flock. The file stays: deleting it would race with a
  // process that opened it but has not locked it yet.
  close(fd_);
}

}  // namespace inac::storage
