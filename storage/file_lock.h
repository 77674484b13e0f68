// An exclusive advisory lock on a file (flock(2)), held for the life of the object: the guard
// that keeps two controllers from writing one database. The kernel releases it when the process
// dies, however it dies, so a SIGKILLed controller never leaves a stale lock behind.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace inac::storage {

class FileLock {
 public:
  // Creates `path` if needed (never deletes it) and takes an exclusive, non-blocking flock on it,
  // then records this process's pid in it. Errors name the file:
  //   FailedPrecondition  another process (or another FileLock in this process) holds the lock;
  //                       the message includes the pid recorded by the holder
  //   PermissionDenied    the file cannot be created or opened
  //   Internal            any other system error
  static absl::StatusOr<std::unique_ptr<FileLock>> Acquire(const std::string& path,
                                                           const std::string& what);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  const std::string& path() const { return path_; }

 private:
  FileLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_;
};

}  // namespace inac::storage
