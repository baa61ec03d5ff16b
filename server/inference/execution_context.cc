#include "server/inference/execution_context.h"

namespace manypy {
namespace {

thread_local const ExecutionContext* t_current = nullptr;

}  // namespace

const ExecutionContext* CurrentExecution() { return t_current; }

ScopedExecution::ScopedExecution(ExecutionContext* context) : saved_(t_current) {
  context->outer = t_current;
  t_current = context;
}

ScopedExecution::~ScopedExecution() { t_current = saved_; }

}  // namespace manypy
