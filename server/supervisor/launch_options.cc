#include "server/supervisor/launch_options.h"

namespace manypy {
namespace {

Status ReadPort(const std::string& flag, const std::string& value, int* port) {
  long n = 0;
  MANYPY_RETURN_IF_ERROR(ParseIntFlag(flag, value, 0, 65535, &n));
  *port = static_cast<int>(n);
  return Status::Ok();
}

// "http" and "no-http" (and the metrics pair) set one switch, the "no-" one inverted.
Status ReadSwitch(const std::string& flag, const std::string& value, bool* on) {
  bool given = false;
  MANYPY_RETURN_IF_ERROR(ParseBoolFlag(flag, value, &given));
  *on = flag.rfind("no-", 0) == 0 ? !given : given;
  return Status::Ok();
}

Status Apply(const std::string& flag, const std::string& value, LaunchOptions* o) {
  if (flag == "help" || flag == "version") o->forward = true;
  else if (flag == "grpc-address") o->grpc_address = value;
  else if (flag == "grpc-port") return ReadPort(flag, value, &o->grpc_port);
  else if (flag == "http" || flag == "no-http") return ReadSwitch(flag, value, &o->http);
  else if (flag == "http-address") o->http_address = value;
  else if (flag == "http-port") return ReadPort(flag, value, &o->http_port);
  else if (flag == "metrics" || flag == "no-metrics") return ReadSwitch(flag, value, &o->metrics);
  else if (flag == "metrics-address") o->metrics_address = value;
  else if (flag == "metrics-port") return ReadPort(flag, value, &o->metrics_port);
  else if (flag == "supervisor" || flag == "no-supervisor") return ReadSwitch(flag, value, &o->supervisor);
  else if (flag == "log-level") o->log_level = value;
  else if (flag == "log-format") o->log_format = value;
  return Status::Ok();  // the serving process's flag: it checks it
}

}  // namespace

StatusOr<LaunchOptions> ReadLaunchOptions(int argc, char** argv) {
  LaunchOptions o;
  MANYPY_RETURN_IF_ERROR(ReadFlags(argc, argv, [&o](const std::string& flag, const std::string& value) {
    return Apply(flag, value, &o);
  }));
  return o;
}

}  // namespace manypy
