#include "clients/perf/perf_options.h"

#include <algorithm>
#include <sstream>

namespace manypy::perf {
namespace {

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(s);
  for (std::string p; std::getline(in, p, sep);) {
    if (!p.empty()) parts.push_back(p);
  }
  return parts;
}

// Parses a number or fails naming the flag.
template <typename T>
Status Number(const std::string& flag, const std::string& text, T* out) {
  try {
    size_t used = 0;
    double v = std::stod(text, &used);
    if (used != text.size()) throw std::invalid_argument(text);
    *out = static_cast<T>(v);
    if (static_cast<double>(*out) != v || v < 0) throw std::invalid_argument(text);
    return Status::Ok();
  } catch (const std::exception&) {
    return InvalidArgument(flag + ": '" + text + "' is not a valid non-negative number");
  }
}

}  // namespace

std::string PerfUsage() {
  return R"(manypy-perf: load generator for any Open Inference Protocol (KServe v2 / Triton) server,
over gRPC or HTTP/REST.

Usage: manypy-perf -m MODEL [-u HOST:PORT] [options]

  -m, --model NAME           model to load (required)
  -x, --model-version V      model version (default: the server's choice)
  -u, --url HOST:PORT        server address (default localhost:8001; -i http: localhost:8000);
                             https://HOST:PORT: over TLS, verified with the system's CAs
                             unless --tls-ca is given (either protocol)
  -i, --protocol P           grpc (default) or http: KServe v2 REST, inputs and outputs as
                             binary data; either way one connection per sender thread
  --concurrency LIST         closed loop: comma-separated levels, e.g. 1,4,16,64 (default 1);
                             each level runs that many threads sending requests back to back
  --rate LIST                open loop instead: comma-separated request rates (requests/s)
  --distribution D           open loop arrivals: poisson (default) or constant
  --max-threads N            open loop: sender threads (default 16); latency counts from the
                             scheduled send time, so a saturated pool shows up as queueing
  --warmup-seconds S         traffic before measuring, per step (default 2)
  --window-seconds S         length of one measurement window (default 5)
  --stability-percent P      stop when two consecutive windows' request rates differ by at
                             most P percent (default 10); 0: measure all --max-windows
  --max-windows N            at most N windows per step (default 10)
  -b, --batch-size N         size of the batch dimension for models that batch (default 1)
  --input NAME=FILE          raw little-endian bytes for input NAME (BYTES: 4-byte length
                             prefixes); one variable dimension is sized from the file.
                             Given several times for one NAME: one input set per file (in
                             order); every input given more than once must be given the
                             same number of times, one given once is in every set. Sender
                             thread w's k-th request sends set (w + k) mod sets, so what
                             requests ask for varies per request and across threads
                             (e.g. a generator's MAX_TOKENS; not with --async)
  --string-length N          length of random BYTES elements (default 8)
  --timeout-ms N             deadline of each request (default 30000)
  --csv PATH                 write the CSV table to PATH (default: stdout)
  --json PATH                also write one JSON record per step to PATH
  --window-log PATH          also append one JSON line per window to PATH as each closes
                             (a long run watched while it runs, e.g. a soak)
  --tls-ca FILE              TLS: PEM CA certificates that verify the server (either protocol)
  --tls-cert FILE            TLS: PEM client certificate for servers that require one
  --tls-key FILE             TLS: the client certificate's PEM private key
  --auth-token-file FILE     send the token in FILE as `authorization: Bearer <token>`
                             (servers started with --auth-token-file)
  --streaming                each request is one ModelStreamInfer stream (gRPC), read to
                             its final response (a streaming model's: one per value it
                             yields); adds the time to first response (p50, p99) and
                             responses/s to the report
  -a, --async                closed loop from one thread: each stream's requests go through
                             gRPC's asynchronous API and one completion queue instead of a
                             thread blocked per stream, so the generator itself costs less
                             CPU per request (gRPC unary, closed loop)
  -h, --help                 this text

Random inputs follow ModelMetadata: variable dimensions become 1, the batch dimension
(ModelConfig max_batch_size > 0) becomes --batch-size, BYTES get random short strings.
Per step it reports throughput (infer_per_s: successful inferences x batch size per second),
p50/p90/p95/p99 latency in ms over successful requests (over failed ones when none
succeeded), and errors by status code. Progress goes to stderr, one line per window.
)";
}

size_t InputSetCount(const PerfOptions& options) {
  size_t sets = 1;
  for (const auto& [name, files] : options.input_files) sets = std::max(sets, files.size());
  return sets;
}

StatusOr<PerfOptions> ParsePerfOptions(int argc, char** argv) {
  PerfOptions o;
  bool url_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i], value;
    size_t eq = flag.find('=');
    bool inline_value = flag.rfind("--", 0) == 0 && eq != std::string::npos;
    if (inline_value) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    }
    if (flag == "-h" || flag == "--help") {
      o.help = true;
      continue;
    }
    if (flag == "--streaming") {
      o.streaming = true;
      continue;
    }
    if (flag == "-a" || flag == "--async") {
      o.async = true;
      continue;
    }
    if (!inline_value) {
      if (i + 1 >= argc) return InvalidArgument(flag + " needs a value (see --help)");
      value = argv[++i];
    }
    Status s = Status::Ok();
    if (flag == "-m" || flag == "--model") o.model = value;
    else if (flag == "-x" || flag == "--model-version") o.model_version = value;
    else if (flag == "-u" || flag == "--url") {
      o.url = value;
      url_given = true;
      if (o.url.rfind("https://", 0) == 0) {
        o.tls.enabled = true;
        o.url = o.url.substr(8);
      } else if (o.url.rfind("http://", 0) == 0) {
        o.url = o.url.substr(7);
      }
    } else if (flag == "-i" || flag == "--protocol") {
      if (value != "grpc" && value != "http") return InvalidArgument("--protocol is grpc or http");
      o.protocol = value;
    }
    else if (flag == "--concurrency") {
      o.concurrency.clear();
      for (const auto& p : Split(value, ',')) {
        int c = 0;
        if (!(s = Number(flag, p, &c)).ok()) return s;
        if (c < 1) return InvalidArgument("--concurrency levels must be >= 1");
        o.concurrency.push_back(c);
      }
    } else if (flag == "--rate") {
      for (const auto& p : Split(value, ',')) {
        double r = 0;
        if (!(s = Number(flag, p, &r)).ok()) return s;
        if (r <= 0) return InvalidArgument("--rate must be > 0");
        o.rates.push_back(r);
      }
    } else if (flag == "--distribution") {
      if (value != "poisson" && value != "constant") {
        return InvalidArgument("--distribution must be poisson or constant");
      }
      o.poisson = value == "poisson";
    } else if (flag == "--max-threads") s = Number(flag, value, &o.max_threads);
    else if (flag == "--warmup-seconds") s = Number(flag, value, &o.warmup_seconds);
    else if (flag == "--window-seconds") s = Number(flag, value, &o.window_seconds);
    else if (flag == "--stability-percent") s = Number(flag, value, &o.stability_percent);
    else if (flag == "--max-windows") s = Number(flag, value, &o.max_windows);
    else if (flag == "-b" || flag == "--batch-size") s = Number(flag, value, &o.batch_size);
    else if (flag == "--timeout-ms") s = Number(flag, value, &o.timeout_ms);
    else if (flag == "--string-length") s = Number(flag, value, &o.string_length);
    else if (flag == "--tls-ca") o.tls.ca_file = value;
    else if (flag == "--tls-cert") o.tls.cert_file = value;
    else if (flag == "--tls-key") o.tls.key_file = value;
    else if (flag == "--auth-token-file") o.auth_token_file = value;
    else if (flag == "--csv") o.csv_path = value;
    else if (flag == "--json") o.json_path = value;
    else if (flag == "--window-log") o.window_log_path = value;

    else if (flag == "--input") {
      size_t at = value.find('=');
      if (at == std::string::npos || at == 0) return InvalidArgument("--input wants NAME=FILE");
      o.input_files[value.substr(0, at)].push_back(value.substr(at + 1));
    } else {
      return InvalidArgument("unknown flag " + flag + " (see --help)");
    }
    if (!s.ok()) return s;
  }
  if (o.help) return o;
  if (o.protocol == "http" && !url_given) o.url = "localhost:8000";
  if (o.tls.cert_file.empty() != o.tls.key_file.empty()) {
    return InvalidArgument("--tls-cert and --tls-key go together");
  }
  if (o.model.empty()) return InvalidArgument("-m MODEL is required (see --help)");
  if (o.concurrency.empty()) return InvalidArgument("--concurrency needs at least one level");
  if (o.streaming && o.protocol != "grpc") {
    return InvalidArgument("--streaming measures gRPC streams (-i grpc)");
  }
  if (o.async && (o.protocol != "grpc" || o.streaming || !o.rates.empty())) {
    return InvalidArgument("--async drives gRPC unary requests in a closed loop (-i grpc, "
                           "--concurrency; not --streaming or --rate)");
  }
  // Inputs named several times make that many sets; they must agree on how many.
  size_t sets = 1;
  std::string sets_from;
  for (const auto& [name, files] : o.input_files) {
    if (files.size() == 1) continue;
    if (sets == 1) {
      sets = files.size();
      sets_from = name;
    } else if (files.size() != sets) {
      return InvalidArgument("--input " + name + " is given " + std::to_string(files.size()) +
                             " times and --input " + sets_from + " " + std::to_string(sets) +
                             " times: inputs given more than once make one input set per file, "
                             "so they must be given the same number of times (or once: shared)");
    }
  }
  if (sets > 1 && o.async) {
    return InvalidArgument("--async sends one request; several input sets (an --input given "
                           "more than once) need the threaded closed loop");
  }
  if (o.window_seconds <= 0) return InvalidArgument("--window-seconds must be > 0");
  if (o.stability_percent < 0) return InvalidArgument("--stability-percent must be >= 0");
  if (o.max_windows < 1 || o.max_threads < 1 || o.batch_size < 1) {
    return InvalidArgument("--max-windows, --max-threads and --batch-size must be >= 1");
  }
  return o;
}

}  // namespace manypy::perf
