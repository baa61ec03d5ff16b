#include "server/supervisor/supervised_child.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>

namespace manypy {
namespace {

void AppendFds(std::ostringstream& out, const char* role, const std::vector<int>& fds) {
  if (fds.empty()) return;
  out << role << "=";
  for (size_t i = 0; i < fds.size(); ++i) out << (i ? "," : "") << fds[i];
  out << ";";
}

bool ParseInt(const std::string& text, int64_t* value) {
  if (text.empty()) return false;
  char* end = nullptr;
  *value = strtoll(text.c_str(), &end, 10);
  return *end == '\0' && *value >= 0;
}

std::vector<std::string> Split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, separator)) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

}  // namespace

std::string EncodeHandover(const SupervisedChild& child) {
  std::ostringstream out;
  AppendFds(out, "grpc", child.grpc_fds);
  AppendFds(out, "http", child.http_fds);
  AppendFds(out, "metrics", child.metrics_fds);
  out << "ready=" << child.ready_fd << ";";
  if (child.switching) out << "switch=1;";
  if (child.reloads > 0) out << "reloads=" << child.reloads << ";";
  out << "restarts=";
  for (size_t i = 0; i < child.restarts.size(); ++i) {
    out << (i ? "," : "") << child.restarts[i].first << ":" << child.restarts[i].second;
  }
  return out.str();
}

std::optional<SupervisedChild> DecodeHandover(const std::string& text) {
  SupervisedChild child;
  for (const std::string& field : Split(text, ';')) {
    size_t eq = field.find('=');
    if (eq == std::string::npos) return std::nullopt;
    const std::string role = field.substr(0, eq), value = field.substr(eq + 1);
    if (role == "restarts") {
      for (const std::string& entry : Split(value, ',')) {
        size_t colon = entry.find(':');
        int64_t count = 0;
        if (colon == std::string::npos || !ParseInt(entry.substr(colon + 1), &count)) return std::nullopt;
        child.restarts.emplace_back(entry.substr(0, colon), count);
      }
      continue;
    }
    if (role == "reloads") {
      if (!ParseInt(value, &child.reloads)) return std::nullopt;
      continue;
    }
    if (role == "switch") {
      if (value != "1") return std::nullopt;
      child.switching = true;
      continue;
    }
    std::vector<int>* fds = role == "grpc"      ? &child.grpc_fds
                            : role == "http"    ? &child.http_fds
                            : role == "metrics" ? &child.metrics_fds
                                                : nullptr;
    if (role != "ready" && fds == nullptr) return std::nullopt;
    for (const std::string& number : Split(value, ',')) {
      int64_t fd = 0;
      if (!ParseInt(number, &fd) || fd > 1 << 20) return std::nullopt;
      if (fds != nullptr) {
        fds->push_back(static_cast<int>(fd));
      } else {
        child.ready_fd = static_cast<int>(fd);
      }
    }
  }
  return child;
}

std::optional<SupervisedChild> TakeSupervisedChild() {
  const char* text = getenv(kSupervisorEnvironment);
  if (text == nullptr) return std::nullopt;
  std::optional<SupervisedChild> child = DecodeHandover(text);
  unsetenv(kSupervisorEnvironment);
  if (!child) return std::nullopt;
  for (const auto* fds : {&child->grpc_fds, &child->http_fds, &child->metrics_fds}) {
    for (int fd : *fds) fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  if (child->ready_fd >= 0) fcntl(child->ready_fd, F_SETFD, FD_CLOEXEC);
  return child;
}

void NotifySupervisorReady(SupervisedChild* child) {
  if (child == nullptr || child->ready_fd < 0) return;
  const char byte = 'R';
  ssize_t ignored = write(child->ready_fd, &byte, 1);
  (void)ignored;  // a parent gone cannot be told; PR_SET_PDEATHSIG ends this process then
  close(child->ready_fd);
  child->ready_fd = -1;
}

}  // namespace manypy
