// PrometheusObserver: pipeline and lifecycle events become the documented
// series (names, labels, values), label sets stay bounded, readiness survives
// an in-place reload. No server, no sockets.
#include "server/metrics/prometheus_observer.h"

#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

namespace manypy {
namespace {

class PrometheusObserverTest : public ::testing::Test {
 protected:
  std::string Text() { return prometheus::TextSerializer().Serialize(registry_.Collect()); }
  bool Has(const std::string& line) { return Text().find(line + "\n") != std::string::npos; }

  static RequestTimes Times(int queue_ms, int compute_ms) {
    RequestTimes t;
    t.received = Clock::now();
    t.prepared = t.received;
    t.started = t.prepared + std::chrono::milliseconds(queue_ms);
    t.computed = t.started + std::chrono::milliseconds(compute_ms);
    t.finished = t.computed;
    return t;
  }

  prometheus::Registry registry_;
  PrometheusObserver observer_{&registry_, 2};
};

TEST_F(PrometheusObserverTest, RequestsAreCountedByOutcomeWithTheirDurations) {
  observer_.OnModelLoaded("m", 3, 1.5, 0.25);
  observer_.OnRequestFinished("m", 3, "a", Status::Ok(), Times(2, 30), 1);
  observer_.OnRequestFinished("m", 3, "b", Internal("raised"), Times(3, 1), 1);
  observer_.OnRequestFinished("m", 3, "c", InvalidArgument("bad"), RequestTimes{}, 0);
  EXPECT_TRUE(Has(R"(manypy_requests_total{model="m",outcome="success",version="3"} 1)")) << Text();
  EXPECT_TRUE(Has(R"(manypy_requests_total{model="m",outcome="model_error",version="3"} 1)"));
  EXPECT_TRUE(Has(R"(manypy_requests_total{model="m",outcome="invalid_argument",version="3"} 1)"));
  EXPECT_TRUE(Has(R"(manypy_requests_total{model="m",outcome="deadline_exceeded",version="3"} 0)"));
  EXPECT_TRUE(Has(R"(manypy_request_duration_seconds_count{model="m",version="3"} 3)"));
  // Only requests that ran waited in the queue; 2 ms falls in the 2.5 ms bucket.
  EXPECT_TRUE(Has(R"(manypy_queue_duration_seconds_count{model="m",version="3"} 2)"));
  EXPECT_TRUE(Has(R"(manypy_queue_duration_seconds_bucket{model="m",version="3",le="0.001"} 0)"));
  EXPECT_TRUE(Has(R"(manypy_model_load_duration_seconds{model="m",version="3"} 1.5)"));
  EXPECT_TRUE(Has(R"(manypy_model_warmup_duration_seconds{model="m",version="3"} 0.25)"));
}

TEST_F(PrometheusObserverTest, ExecutionsCountRowsBatchesAndInterpreterTime) {
  Clock::time_point start = Clock::now();
  observer_.OnExecutionStarted("m", 1, 1);
  EXPECT_TRUE(Has(R"(manypy_interpreter_in_flight_executions{interpreter="1"} 1)")) << Text();
  observer_.OnExecutionFinished("m", 1, 1, 6, start, start + std::chrono::milliseconds(500), "");
  EXPECT_TRUE(Has(R"(manypy_interpreter_in_flight_executions{interpreter="1"} 0)"));
  EXPECT_TRUE(Has(R"(manypy_interpreter_busy_seconds_total{interpreter="1"} 0.5)"));
  EXPECT_TRUE(Has(R"(manypy_interpreter_busy_seconds_total{interpreter="0"} 0)"));
  EXPECT_TRUE(Has(R"(manypy_inferences_total{model="m",version="1"} 6)"));
  EXPECT_TRUE(Has(R"(manypy_executions_total{model="m",version="1"} 1)"));
  EXPECT_TRUE(Has(R"(manypy_batch_size_sum{model="m",version="1"} 6)"));
  EXPECT_TRUE(Has(R"(manypy_batch_size_bucket{model="m",version="1",le="4"} 0)"));
  EXPECT_TRUE(Has(R"(manypy_batch_size_bucket{model="m",version="1",le="8"} 1)"));
  EXPECT_TRUE(Has(R"(manypy_compute_duration_seconds_sum{model="m",version="1"} 0.5)"));
}

TEST_F(PrometheusObserverTest, ExceptionTypesAndUnknownModelNamesStayBounded) {
  Clock::time_point t = Clock::now();
  for (int i = 0; i < 40; ++i) {
    observer_.OnExecutionFinished("m", 1, 0, 1, t, t, "Error" + std::to_string(i));
  }
  for (int i = 0; i < 70; ++i) {
    observer_.OnRequestFinished("nope" + std::to_string(i), 0, "", NotFound("x"), RequestTimes{}, 0);
  }
  observer_.OnExecutionFinished("m", 1, 0, 1, t, t, "Error0");
  EXPECT_TRUE(Has(R"(manypy_model_exceptions_total{model="m",type="Error0",version="1"} 2)")) << Text();
  EXPECT_TRUE(Has(R"(manypy_model_exceptions_total{model="m",type="Error31",version="1"} 1)"));
  EXPECT_TRUE(Has(R"(manypy_model_exceptions_total{model="m",type="other",version="1"} 8)"));
  EXPECT_TRUE(Has(R"(manypy_requests_total{model="nope0",outcome="not_found",version=""} 1)"));
  EXPECT_TRUE(Has(R"(manypy_requests_total{model="nope63",outcome="not_found",version=""} 1)"));
  EXPECT_TRUE(Has(R"(manypy_requests_total{model="other",outcome="not_found",version=""} 6)"));
  EXPECT_EQ(Text().find(R"(model="nope64")"), std::string::npos);
}

TEST_F(PrometheusObserverTest, ReadinessSurvivesAnInPlaceReloadAndEndsAtUnload) {
  observer_.OnModelLoaded("m", 1, 0, 0);
  observer_.OnModelLoaded("m", 1, 0, 0);  // the same version again, before the old load retires
  observer_.OnModelRetired("m", 1);
  EXPECT_TRUE(Has(R"(manypy_model_ready{model="m",version="1"} 1)")) << Text();
  observer_.OnModelRetired("m", 1);
  EXPECT_TRUE(Has(R"(manypy_model_ready{model="m",version="1"} 0)"));
  observer_.OnModelLoadFailed("m", 2, Internal("boom"));
  EXPECT_TRUE(Has(R"(manypy_model_load_failures_total{model="m",version="2"} 1)"));
}

TEST(PrometheusObserverOutcome, NamesEveryStatusClass) {
  EXPECT_STREQ(PrometheusObserver::Outcome(Status::Ok()), "success");
  EXPECT_STREQ(PrometheusObserver::Outcome(Unavailable("")), "unavailable");
  EXPECT_STREQ(PrometheusObserver::Outcome({StatusCode::kResourceExhausted, ""}), "resource_exhausted");
  EXPECT_STREQ(PrometheusObserver::Outcome({StatusCode::kDeadlineExceeded, ""}), "deadline_exceeded");
  EXPECT_STREQ(PrometheusObserver::Outcome(Internal("")), "model_error");
  EXPECT_STREQ(PrometheusObserver::Outcome(Cancelled("")), "cancelled");
  EXPECT_STREQ(PrometheusObserver::Outcome({StatusCode::kAlreadyExists, ""}), "other");
}

}  // namespace
}  // namespace manypy
