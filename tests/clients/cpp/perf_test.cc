// manypy-perf as a subprocess against the real manypy-server: the JSON it
// writes is well-formed and its numbers are consistent. And its input sets
// (an --input given several times) parsed and cycled, directly.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "clients/perf/input_data.h"
#include "clients/perf/perf_options.h"
#include "tests/test_util/server_process.h"

namespace manypy {
namespace {

namespace fs = std::filesystem;

// The whole text of `path` (manypy-perf's JSON or its stderr).
std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The number after "key": in manypy-perf's JSON (the first one); a key that
// is missing fails the test and reads as 0.
double JsonNumber(const std::string& json, const std::string& key) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(json, m, std::regex("\"" + key + "\": (-?[0-9.]+)"))) << key << json;
  return m.empty() ? 0.0 : std::stod(m[1]);
}

// One JSON record of manypy-perf's output: numeric fields, errors_by_code and
// the text of error_messages (free text: not parsed for numbers).
struct Record {
  std::map<std::string, double> numbers;
  std::map<std::string, double> errors_by_code;
  std::string error_messages;
};

std::vector<Record> ParseRecords(const std::string& json) {
  std::vector<Record> records;
  static const std::regex number("\"([a-z0-9_]+)\": (-?[0-9.]+)");
  static const std::regex codes("\"errors_by_code\": \\{([^}]*)\\}");
  static const std::regex code("\"([A-Z_]+)\": ([0-9]+)");
  size_t at = 0;
  while ((at = json.find("{\"concurrency\"", at)) != std::string::npos) {
    size_t end = json.find("\"stable\"", at);
    std::string text = json.substr(at, end - at);
    Record r;
    size_t messages = text.find("\"error_messages\"");
    size_t windows = text.find("\"windows\"");
    if (messages != std::string::npos && windows != std::string::npos) {
      r.error_messages = text.substr(messages, windows - messages);
      text.erase(messages, windows - messages);
    }
    std::smatch m;
    if (std::regex_search(text, m, codes)) {
      std::string inner = m[1];
      for (std::sregex_iterator i(inner.begin(), inner.end(), code), e; i != e; ++i) {
        r.errors_by_code[(*i)[1]] = std::stod((*i)[2]);
      }
      text = m.prefix().str() + m.suffix().str();
    }
    for (std::sregex_iterator i(text.begin(), text.end(), number), e; i != e; ++i) {
      r.numbers[(*i)[1]] = std::stod((*i)[2]);
    }
    records.push_back(r);
    at = end;
  }
  return records;
}

class PerfTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start(MANYPY_SERVER_BINARY,
                              {"--model-control-mode=explicit", "--load-model=two_io",
                               "--load-model=failing", "--interpreters=2",
                               std::string("--model-repository=") + MANYPY_TEST_REPOSITORY}))
        << "server did not start";
    dir_ = fs::temp_directory_path() / ("manypy_perf_test_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    EXPECT_EQ(server_.Stop(), 0);
    fs::remove_all(dir_);
  }

  // Runs manypy-perf with `args`; returns its JSON records (checked to be valid JSON).
  std::vector<Record> RunPerf(const std::string& args) {
    std::string json = (dir_ / "out.json").string();
    std::string cmd = std::string(MANYPY_PERF_BINARY) + " -u " + server_.address() +
                      " --warmup-seconds 0.5 --window-seconds 1 --max-windows 3 --json " + json +
                      " --csv " + (dir_ / "out.csv").string() + " " + args;
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::string check = std::string(MANYPY_PYTHON) + " -c 'import json,sys; json.load(open(sys.argv[1]))' " + json;
    EXPECT_EQ(std::system(check.c_str()), 0) << "not valid JSON: " << json;
    return ParseRecords(ReadFile(json));
  }

  static void ExpectConsistent(const Record& r) {
    auto n = r.numbers;
    EXPECT_EQ(n["requests"], n["successes"] + n["errors"]);
    double by_code = 0;
    for (const auto& [c, count] : r.errors_by_code) by_code += count;
    EXPECT_EQ(by_code, n["errors"]);
    EXPECT_GT(n["requests"], 0);
    EXPECT_LE(n["p50_ms"], n["p90_ms"]);
    EXPECT_LE(n["p90_ms"], n["p95_ms"]);
    EXPECT_LE(n["p95_ms"], n["p99_ms"]);
    EXPECT_GT(n["p50_ms"], 0);
    EXPECT_GE(n["windows"], 1);
    EXPECT_LE(n["windows"], 3);
  }

  testing::ServerProcess server_;
  fs::path dir_;
};

TEST_F(PerfTest, ConcurrencySweepOnTwoIo) {
  std::vector<Record> records = RunPerf("-m two_io --concurrency 1,2");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].numbers["concurrency"], 1);
  EXPECT_EQ(records[1].numbers["concurrency"], 2);
  for (const Record& r : records) {
    ExpectConsistent(r);
    auto n = r.numbers;
    EXPECT_GT(n["infer_per_s"], 0);
    EXPECT_EQ(n["errors"], 0);
    EXPECT_DOUBLE_EQ(n["infer_per_s"], n["requests_per_s"]);
  }
  std::ifstream csv(dir_ / "out.csv");
  std::string header, line;
  std::getline(csv, header);
  EXPECT_EQ(header.rfind("concurrency,request_rate,infer_per_s,", 0), 0u) << header;
  int lines = 0;
  while (std::getline(csv, line)) ++lines;
  EXPECT_EQ(lines, 2);
}

// --async: one thread keeps every stream's request in flight; the same
// figures as the threaded closed loop, and the model's failures still
// counted by code with their message.
TEST_F(PerfTest, AsyncClosedLoopKeepsEveryStreamBusyAndCountsFailures) {
  std::vector<Record> records = RunPerf("--async -m two_io --concurrency 1,4");
  ASSERT_EQ(records.size(), 2u);
  for (Record& r : records) {
    ExpectConsistent(r);
    EXPECT_EQ(r.numbers["errors"], 0);
    EXPECT_GT(r.numbers["infer_per_s"], 0);
  }
  EXPECT_EQ(records[1].numbers["concurrency"], 4);
  std::vector<float> negative = {-1, -2, -3};
  std::string input = (dir_ / "negative.bin").string();
  std::ofstream(input, std::ios::binary)
      .write(reinterpret_cast<const char*>(negative.data()), negative.size() * sizeof(float));
  records = RunPerf("-a -m failing --concurrency 2 --input INPUT__0=" + input);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].numbers["successes"], 0);
  EXPECT_EQ(records[0].errors_by_code["INTERNAL"], records[0].numbers["requests"]);
  EXPECT_NE(records[0].error_messages.find("negative input is not allowed"), std::string::npos)
      << records[0].error_messages;
  // Only what it drives: gRPC unary requests in a closed loop.
  std::string perf = std::string(MANYPY_PERF_BINARY) + " -u " + server_.address();
  EXPECT_NE(std::system((perf + " --async -m two_io -i http 2>/dev/null").c_str()), 0);
  EXPECT_NE(std::system((perf + " --async -m two_io --rate 10 2>/dev/null").c_str()), 0);
}

TEST_F(PerfTest, OpenLoopRate) {
  std::vector<Record> records = RunPerf("-m two_io --rate 100 --distribution constant");
  ASSERT_EQ(records.size(), 1u);
  ExpectConsistent(records[0]);
  EXPECT_EQ(records[0].numbers["request_rate"], 100);
  EXPECT_NEAR(records[0].numbers["infer_per_s"], 100, 30);
}

TEST_F(PerfTest, EveryRequestOfFailingIsCountedAsInternal) {
  std::vector<float> negative = {-1, -2, -3};
  std::string input = (dir_ / "negative.bin").string();
  std::ofstream(input, std::ios::binary)
      .write(reinterpret_cast<const char*>(negative.data()), negative.size() * sizeof(float));
  std::vector<Record> records = RunPerf("-m failing --concurrency 2 --input INPUT__0=" + input);
  ASSERT_EQ(records.size(), 1u);
  Record r = records[0];
  ExpectConsistent(r);
  EXPECT_EQ(r.numbers["successes"], 0);
  EXPECT_EQ(r.numbers["infer_per_s"], 0);
  EXPECT_EQ(r.numbers["errors"], r.numbers["requests"]);
  ASSERT_EQ(r.errors_by_code.size(), 1u);
  EXPECT_EQ(r.errors_by_code["INTERNAL"], r.numbers["errors"]);
  // What the failures said, not only how many: the model's own exception.
  EXPECT_NE(r.error_messages.find("\"INTERNAL\": \""), std::string::npos) << r.error_messages;
  EXPECT_NE(r.error_messages.find("negative input is not allowed"), std::string::npos)
      << r.error_messages;
}

TEST_F(PerfTest, WindowLogHasOneJsonLinePerWindowAndStabilityZeroRunsThemAll) {
  std::string log = (dir_ / "windows.jsonl").string();
  std::vector<Record> records =
      RunPerf("-m two_io --rate 50 --distribution constant --stability-percent 0 --window-log " + log);
  ASSERT_EQ(records.size(), 1u);
  // A constant rate makes windows agree at once; 0 must not stop early.
  EXPECT_EQ(records[0].numbers["windows"], 3);
  std::ifstream in(log);
  std::string line;
  std::vector<Record> windows;
  while (std::getline(in, line)) {
    std::string check = std::string(MANYPY_PYTHON) +
                        " -c 'import json,sys; json.loads(sys.argv[1])' '" + line + "'";
    EXPECT_EQ(std::system(check.c_str()), 0) << "not a JSON line: " << line;
    auto parsed = ParseRecords(line);
    ASSERT_EQ(parsed.size(), 1u) << line;
    windows.push_back(parsed[0]);
  }
  ASSERT_EQ(windows.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    ExpectConsistent(windows[i]);
    EXPECT_EQ(windows[i].numbers["windows"], i + 1);
    EXPECT_EQ(windows[i].numbers["request_rate"], 50);
    EXPECT_NEAR(windows[i].numbers["seconds"], 1.0, 0.5);
  }
  // The step's record is its last two windows together.
  EXPECT_EQ(records[0].numbers["requests"],
            windows[1].numbers["requests"] + windows[2].numbers["requests"]);
  EXPECT_NE(std::system((std::string(MANYPY_PERF_BINARY) +
                         " -m two_io --stability-percent -1 2> /dev/null").c_str()),
            0);
}

TEST_F(PerfTest, HttpProtocolMeasuresTwoIoAndCountsFailuresByCode) {
  std::string http = " -i http -u 127.0.0.1:" + std::to_string(server_.http_port());
  std::vector<Record> records = RunPerf("-m two_io --concurrency 1,2" + http);
  ASSERT_EQ(records.size(), 2u);
  for (const Record& r : records) {
    ExpectConsistent(r);
    EXPECT_GT(r.numbers.at("infer_per_s"), 0);
    EXPECT_EQ(r.numbers.at("errors"), 0);
  }
  std::string out = ReadFile(dir_ / "out.json");
  EXPECT_NE(out.find("\"protocol\": \"http\""), std::string::npos) << out;

  std::vector<float> negative = {-1, -2, -3};
  std::string input = (dir_ / "negative.bin").string();
  std::ofstream(input, std::ios::binary)
      .write(reinterpret_cast<const char*>(negative.data()), negative.size() * sizeof(float));
  records = RunPerf("-m failing --concurrency 2 --input INPUT__0=" + input + http);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].numbers["successes"], 0);
  EXPECT_EQ(records[0].errors_by_code["INTERNAL"], records[0].numbers["errors"]);
  EXPECT_GT(records[0].numbers["errors"], 0);
}

TEST_F(PerfTest, BadFlagsAndUnknownModelFail) {
  std::string perf = MANYPY_PERF_BINARY;
  EXPECT_EQ(std::system((perf + " --help > /dev/null").c_str()), 0);
  EXPECT_NE(std::system((perf + " --concurrency 1 2> /dev/null").c_str()), 0);  // no -m
  EXPECT_NE(std::system((perf + " -m two_io --bogus 1 2> /dev/null").c_str()), 0);
  EXPECT_NE(std::system((perf + " -u " + server_.address() + " -m no_such_model 2> /dev/null").c_str()), 0);
}

// Connections come up before anything is measured, and a server that cannot be
// reached fails the run at once with the address, not with a window of errors.
TEST_F(PerfTest, AServerThatCannotBeReachedFailsTheRunNamingIt) {
  std::string address = server_.address();
  ASSERT_EQ(server_.Stop(), 0);
  std::string err = (dir_ / "err.txt").string();
  std::string cmd = std::string(MANYPY_PERF_BINARY) + " -u " + address +
                    " -m two_io --timeout-ms 500 --warmup-seconds 0 --window-seconds 1 2> " + err;
  EXPECT_EQ(WEXITSTATUS(std::system(cmd.c_str())), 1) << cmd;
  std::string said = ReadFile(err);
  EXPECT_NE(said.find("UNAVAILABLE: could not connect to " + address + " within 500 ms"),
            std::string::npos)
      << said;
  ASSERT_TRUE(server_.Start(MANYPY_SERVER_BINARY,
                            {"--model-control-mode=explicit", "--load-model=two_io",
                             std::string("--model-repository=") + MANYPY_TEST_REPOSITORY}));
}

}  // namespace
}  // namespace manypy

namespace manypy {
namespace {

// Runs manypy-perf --streaming (2 streams, two windows of 1 s) against the
// streaming test model ticker on a server of its own: `inputs` are int64
// values written as raw files, in order (a name given twice makes input
// sets), beside ticker's MARKER (one empty BYTES element). Returns the JSON
// manypy-perf wrote; "" (the failure recorded) when it or the server failed.
std::string RunTickerStreams(const std::string& tag,
                             const std::vector<std::pair<std::string, int64_t>>& inputs) {
  testing::ServerProcess server;
  if (!server.Start(MANYPY_SERVER_BINARY, {"--interpreters=2", std::string("--model-repository=") +
                                                                   MANYPY_TEST_REPOSITORY + "/streaming"})) {
    ADD_FAILURE() << "server did not start";
    return "";
  }
  fs::path dir = fs::temp_directory_path() / ("manypy_perf_" + tag + "_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::string flags;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& [name, value] = inputs[i];
    fs::path file = dir / (name + "." + std::to_string(i));
    std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(&value), sizeof value);
    flags += " --input " + name + "=" + file.string();
  }
  std::ofstream(dir / "marker", std::ios::binary).write("\0\0\0\0", 4);
  std::string json = (dir / "out.json").string();
  std::string cmd = std::string(MANYPY_PERF_BINARY) + " -u " + server.address() +
                    " -m ticker --streaming --concurrency 2 --warmup-seconds 0.5 --window-seconds 1"
                    " --max-windows 2 --stability-percent 0 --json " + json + flags +
                    " --input MARKER=" + (dir / "marker").string();
  int status = std::system(cmd.c_str());
  EXPECT_EQ(status, 0) << cmd;
  std::string out = status == 0 ? ReadFile(json) : "";
  EXPECT_EQ(server.Stop(), 0);
  fs::remove_all(dir);
  return out;
}

// --streaming against the streaming test model ticker: every response of
// every stream counted, and the time to first response within the stream's.
TEST(PerfStreamingTest, StreamsReportTheirResponsesAndTimeToFirstResponse) {
  std::string out = RunTickerStreams("stream", {{"COUNT", 5}, {"DELAY_MS", 2}, {"SIZE", 1}});
  ASSERT_FALSE(out.empty());
  auto number = [&](const std::string& key) { return JsonNumber(out, key); };
  EXPECT_NE(out.find("\"streaming\": true"), std::string::npos) << out;
  EXPECT_EQ(number("errors"), 0);
  EXPECT_GT(number("requests"), 0);
  EXPECT_EQ(number("responses"), 5 * number("requests"));  // 5 per stream, none lost
  EXPECT_NEAR(number("responses_per_s"), 5 * number("requests_per_s"), 0.01 * number("responses_per_s"));
  EXPECT_GT(number("first_response_p50_ms"), 0);
  EXPECT_LT(number("first_response_p50_ms"), number("p50_ms"));  // 4 more responses, 2 ms apart
  // HTTP has no --streaming here.
  EXPECT_NE(std::system((std::string(MANYPY_PERF_BINARY) + " -m ticker -i http --streaming 2>/dev/null").c_str()), 0);
}

}  // namespace
}  // namespace manypy

namespace manypy {
namespace {

StatusOr<perf::PerfOptions> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "manypy-perf");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return perf::ParsePerfOptions(static_cast<int>(argv.size()), argv.data());
}

// An --input given once is one set, as before; given n times, n sets in the
// order given, an input given once shared by all of them.
TEST(PerfInputSetsTest, InputsGivenSeveralTimesMakeThatManySets) {
  auto one = Parse({"-m", "m", "--input", "A=a.bin", "--input", "B=b.bin"});
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(perf::InputSetCount(*one), 1u);
  EXPECT_EQ(one->input_files.at("A"), std::vector<std::string>{"a.bin"});
  auto three = Parse({"-m", "m", "--input", "A=a1", "--input", "B=b", "--input", "A=a2",
                      "--input=A=a3", "--input", "C=c1", "--input", "C=c2", "--input", "C=c3"});
  ASSERT_TRUE(three.ok()) << three.status().ToString();
  EXPECT_EQ(perf::InputSetCount(*three), 3u);
  EXPECT_EQ(three->input_files.at("A"), (std::vector<std::string>{"a1", "a2", "a3"}));
  EXPECT_EQ(three->input_files.at("B"), std::vector<std::string>{"b"});
  auto none = Parse({"-m", "m"});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(perf::InputSetCount(*none), 1u);
}

// Inputs given more than once but not the same number of times: refused,
// naming both; and --async, which sends one request, refuses several sets.
TEST(PerfInputSetsTest, MismatchedCountsAndAsyncAreRefused) {
  auto mismatch = Parse({"-m", "m", "--input", "A=a1", "--input", "A=a2", "--input", "B=b1",
                         "--input", "B=b2", "--input", "B=b3"});
  ASSERT_FALSE(mismatch.ok());
  EXPECT_EQ(mismatch.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mismatch.status().message().find("--input B is given 3 times"), std::string::npos)
      << mismatch.status().message();
  EXPECT_NE(mismatch.status().message().find("--input A 2 times"), std::string::npos)
      << mismatch.status().message();
  auto async = Parse({"-m", "m", "-a", "--input", "A=a1", "--input", "A=a2"});
  ASSERT_FALSE(async.ok());
  EXPECT_NE(async.status().message().find("--async"), std::string::npos);
  EXPECT_TRUE(Parse({"-m", "m", "-a", "--input", "A=a1"}).ok());
}

// Thread w's k-th request sends set (w + k) mod n: each thread goes through
// every set in order, and at any request number the threads are spread over
// the sets (not all asking for the same one at once).
TEST(PerfInputSetsTest, EachThreadCyclesFromItsOwnOffset) {
  std::vector<size_t> thread0, thread3;
  for (uint64_t k = 0; k < 7; ++k) {
    thread0.push_back(perf::InputSetFor(0, k, 5));
    thread3.push_back(perf::InputSetFor(3, k, 5));
  }
  EXPECT_EQ(thread0, (std::vector<size_t>{0, 1, 2, 3, 4, 0, 1}));
  EXPECT_EQ(thread3, (std::vector<size_t>{3, 4, 0, 1, 2, 3, 4}));
  std::vector<int> first_request(5, 0);
  for (size_t w = 0; w < 10; ++w) ++first_request[perf::InputSetFor(w, 0, 5)];
  EXPECT_EQ(first_request, std::vector<int>(5, 2));
  for (uint64_t k = 0; k < 4; ++k) EXPECT_EQ(perf::InputSetFor(2, k, 1), 0u);
}

// End to end: ticker streams COUNT responses; COUNT given as 3 and 7 makes
// two sets, so one run's streams have 3 or 7 responses, about 5 on average.
TEST(PerfInputSetsTest, StreamsCycleThroughTheirSets) {
  std::string out = RunTickerStreams("sets", {{"COUNT", 3}, {"COUNT", 7}, {"DELAY_MS", 2}, {"SIZE", 1}});
  ASSERT_FALSE(out.empty());
  auto number = [&](const std::string& key) { return JsonNumber(out, key); };
  EXPECT_EQ(number("errors"), 0);
  double requests = number("requests"), responses = number("responses");
  ASSERT_GT(requests, 4);
  // Each thread alternates 3 and 7: over its measured requests, 5 on average
  // within one request's difference (2 threads).
  EXPECT_NEAR(responses / requests, 5.0, 2 * 4.0 / requests + 0.01) << out;
}

}  // namespace
}  // namespace manypy
