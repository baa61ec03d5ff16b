// VersionLifecycle's legal transitions and refusal of every other one, and
// the availability-preserving reload policy's steps.
#include "server/lifecycle/version_lifecycle.h"

#include <gtest/gtest.h>

#include <vector>

#include "server/lifecycle/reload_policy.h"

namespace manypy {
namespace {

using S = VersionState;

// Brings a fresh lifecycle to `state` along the legal path.
void MoveTo(VersionLifecycle& v, S state) {
  if (state == S::kLoading) return;
  if (state == S::kFailed) {
    ASSERT_TRUE(v.Fail("broken").ok());
    return;
  }
  ASSERT_TRUE(v.Ready().ok());
  if (state == S::kReady) return;
  ASSERT_TRUE(v.Drain().ok());
  if (state == S::kDraining) return;
  ASSERT_TRUE(v.StartUnload().ok());
  if (state == S::kUnloading) return;
  ASSERT_TRUE(v.FinishUnload().ok());
}

TEST(VersionLifecycleTest, FollowsLoadingReadyDrainingUnloadingUnloaded) {
  VersionLifecycle v("m", 3);
  EXPECT_EQ(v.state(), S::kLoading);
  EXPECT_TRUE(v.Ready().ok());
  EXPECT_EQ(v.state(), S::kReady);
  EXPECT_TRUE(v.Drain().ok());
  EXPECT_EQ(v.state(), S::kDraining);
  EXPECT_TRUE(v.StartUnload().ok());
  EXPECT_EQ(v.state(), S::kUnloading);
  EXPECT_TRUE(v.FinishUnload().ok());
  EXPECT_EQ(v.state(), S::kUnloaded);
  EXPECT_EQ(v.reason(), "");
}

TEST(VersionLifecycleTest, ALoadThatFailsEndsInFailedWithItsReason) {
  VersionLifecycle v("m", 1);
  EXPECT_TRUE(v.Fail("ValueError: bad weights").ok());
  EXPECT_EQ(v.state(), S::kFailed);
  EXPECT_EQ(v.reason(), "ValueError: bad weights");
}

TEST(VersionLifecycleTest, EveryOtherTransitionIsRefusedAsABugAndChangesNothing) {
  struct Move {
    const char* name;
    S from;
    Status (*call)(VersionLifecycle&);
  };
  const std::vector<Move> moves = {
      {"Ready", S::kLoading, [](VersionLifecycle& v) { return v.Ready(); }},
      {"Fail", S::kLoading, [](VersionLifecycle& v) { return v.Fail("x"); }},
      {"Drain", S::kReady, [](VersionLifecycle& v) { return v.Drain(); }},
      {"StartUnload", S::kDraining, [](VersionLifecycle& v) { return v.StartUnload(); }},
      {"FinishUnload", S::kUnloading, [](VersionLifecycle& v) { return v.FinishUnload(); }},
  };
  const std::vector<S> states = {S::kLoading,   S::kReady,    S::kDraining,
                                 S::kUnloading, S::kUnloaded, S::kFailed};
  int refused = 0;
  for (const Move& move : moves) {
    for (S from : states) {
      VersionLifecycle v("m", 2);
      MoveTo(v, from);
      Status s = move.call(v);
      if (from == move.from) {
        EXPECT_TRUE(s.ok()) << move.name << " from " << VersionStateName(from);
        continue;
      }
      ++refused;
      EXPECT_EQ(s.code(), StatusCode::kInternal) << move.name << " from " << VersionStateName(from);
      EXPECT_NE(s.message().find(std::string("no transition from ") + VersionStateName(from)),
                std::string::npos)
          << s.message();
      EXPECT_EQ(v.state(), from) << move.name << " changed the state";
    }
  }
  EXPECT_EQ(refused, 25);  // 5 moves x 6 states, 5 of them legal
}

TEST(ReloadPolicyTest, AvailabilityPreservingLoadsTheNewVersionBeforeDrainingTheOld) {
  VersionLifecycle old_version("m", 1), new_version("m", 2);
  MoveTo(old_version, S::kReady);
  // Reload: load first while the old one serves, then drain the old one.
  EXPECT_EQ(AvailabilityPreservingNextStep(&old_version, &new_version), ReloadStep::kLoadNew);
  ASSERT_TRUE(new_version.Ready().ok());
  EXPECT_EQ(AvailabilityPreservingNextStep(&old_version, &new_version), ReloadStep::kDrainOld);
  ASSERT_TRUE(old_version.Drain().ok());
  EXPECT_EQ(AvailabilityPreservingNextStep(&old_version, &new_version), ReloadStep::kDone);
}

TEST(ReloadPolicyTest, AFailedNewVersionLeavesTheOldOneServing) {
  VersionLifecycle old_version("m", 1), new_version("m", 2);
  MoveTo(old_version, S::kReady);
  ASSERT_TRUE(new_version.Fail("broken").ok());
  EXPECT_EQ(AvailabilityPreservingNextStep(&old_version, &new_version), ReloadStep::kDone);
  EXPECT_EQ(old_version.state(), S::kReady);
}

TEST(ReloadPolicyTest, FirstLoadAndUnload) {
  VersionLifecycle first("m", 1);
  EXPECT_EQ(AvailabilityPreservingNextStep(nullptr, &first), ReloadStep::kLoadNew);
  ASSERT_TRUE(first.Ready().ok());
  EXPECT_EQ(AvailabilityPreservingNextStep(nullptr, &first), ReloadStep::kDone);
  // An unload wants no version: the serving one drains.
  EXPECT_EQ(AvailabilityPreservingNextStep(&first, nullptr), ReloadStep::kDrainOld);
  ASSERT_TRUE(first.Drain().ok());
  EXPECT_EQ(AvailabilityPreservingNextStep(&first, nullptr), ReloadStep::kDone);
  EXPECT_EQ(AvailabilityPreservingNextStep(nullptr, nullptr), ReloadStep::kDone);
}

}  // namespace
}  // namespace manypy
