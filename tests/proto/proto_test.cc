// Wire facts of proto/: names and numbers that must equal those of Triton's
// grpc_service.proto / model_config.proto (triton-inference-server/common,
// protobuf/) and gRPC's grpc/health/v1/health.proto, hand-computed encodings,
// serialization round trips and an in-process call through the stubs.

#include <gtest/gtest.h>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "proto/grpc_service.grpc.pb.h"
#include "proto/grpc_service.pb.h"
#include "proto/health.grpc.pb.h"
#include "proto/health.pb.h"
#include "proto/model_config.pb.h"

namespace {

using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::EnumDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::MethodDescriptor;
using google::protobuf::ServiceDescriptor;

const Descriptor* Message(const std::string& full_name) {
  // Touch the generated files so their descriptors are registered.
  (void)inference::ModelInferRequest::descriptor();
  (void)inference::ModelConfig::descriptor();
  (void)grpc::health::v1::HealthCheckRequest::descriptor();
  return DescriptorPool::generated_pool()->FindMessageTypeByName(full_name);
}

struct FieldFact {
  const char* message;
  const char* field;
  int number;
  FieldDescriptor::Type type;
  bool repeated;
};

constexpr auto kString = FieldDescriptor::TYPE_STRING;
constexpr auto kBytes = FieldDescriptor::TYPE_BYTES;
constexpr auto kBool = FieldDescriptor::TYPE_BOOL;
constexpr auto kInt32 = FieldDescriptor::TYPE_INT32;
constexpr auto kInt64 = FieldDescriptor::TYPE_INT64;
constexpr auto kUint32 = FieldDescriptor::TYPE_UINT32;
constexpr auto kUint64 = FieldDescriptor::TYPE_UINT64;
constexpr auto kFloat = FieldDescriptor::TYPE_FLOAT;
constexpr auto kDouble = FieldDescriptor::TYPE_DOUBLE;
constexpr auto kMsg = FieldDescriptor::TYPE_MESSAGE;
constexpr auto kEnum = FieldDescriptor::TYPE_ENUM;

void ExpectFields(const std::vector<FieldFact>& facts) {
  for (const auto& f : facts) {
    SCOPED_TRACE(std::string(f.message) + "." + f.field);
    const Descriptor* d = Message(f.message);
    ASSERT_NE(d, nullptr);
    const FieldDescriptor* field = d->FindFieldByName(f.field);
    ASSERT_NE(field, nullptr);
    EXPECT_EQ(field->number(), f.number);
    EXPECT_EQ(field->type(), f.type);
    EXPECT_EQ(field->is_repeated(), f.repeated);
  }
}

TEST(ProtoWire, SharedMemoryMessages) {
  ExpectFields({
      {"inference.SystemSharedMemoryStatusRequest", "name", 1, kString, false},
      {"inference.SystemSharedMemoryStatusResponse", "regions", 1, kMsg, true},
      {"inference.SystemSharedMemoryStatusResponse.RegionStatus", "name", 1, kString, false},
      {"inference.SystemSharedMemoryStatusResponse.RegionStatus", "key", 2, kString, false},
      {"inference.SystemSharedMemoryStatusResponse.RegionStatus", "offset", 3, kUint64, false},
      {"inference.SystemSharedMemoryStatusResponse.RegionStatus", "byte_size", 4, kUint64, false},
      {"inference.SystemSharedMemoryRegisterRequest", "name", 1, kString, false},
      {"inference.SystemSharedMemoryRegisterRequest", "key", 2, kString, false},
      {"inference.SystemSharedMemoryRegisterRequest", "offset", 3, kUint64, false},
      {"inference.SystemSharedMemoryRegisterRequest", "byte_size", 4, kUint64, false},
      {"inference.SystemSharedMemoryUnregisterRequest", "name", 1, kString, false},
      {"inference.CudaSharedMemoryStatusRequest", "name", 1, kString, false},
      {"inference.CudaSharedMemoryStatusResponse", "regions", 1, kMsg, true},
      {"inference.CudaSharedMemoryStatusResponse.RegionStatus", "name", 1, kString, false},
      {"inference.CudaSharedMemoryStatusResponse.RegionStatus", "device_id", 2, kUint64, false},
      {"inference.CudaSharedMemoryStatusResponse.RegionStatus", "byte_size", 3, kUint64, false},
      {"inference.CudaSharedMemoryRegisterRequest", "name", 1, kString, false},
      {"inference.CudaSharedMemoryRegisterRequest", "raw_handle", 2, kBytes, false},
      {"inference.CudaSharedMemoryRegisterRequest", "device_id", 3, kInt64, false},
      {"inference.CudaSharedMemoryRegisterRequest", "byte_size", 4, kUint64, false},
      {"inference.CudaSharedMemoryUnregisterRequest", "name", 1, kString, false},
  });
}

TEST(ProtoWire, InferenceMessages) {
  ExpectFields({
      {"inference.ServerLiveResponse", "live", 1, kBool, false},
      {"inference.ServerReadyResponse", "ready", 1, kBool, false},
      {"inference.ModelReadyRequest", "name", 1, kString, false},
      {"inference.ModelReadyRequest", "version", 2, kString, false},
      {"inference.ModelReadyResponse", "ready", 1, kBool, false},
      {"inference.ServerMetadataResponse", "name", 1, kString, false},
      {"inference.ServerMetadataResponse", "version", 2, kString, false},
      {"inference.ServerMetadataResponse", "extensions", 3, kString, true},
      {"inference.ModelMetadataRequest", "name", 1, kString, false},
      {"inference.ModelMetadataRequest", "version", 2, kString, false},
      {"inference.ModelMetadataResponse", "name", 1, kString, false},
      {"inference.ModelMetadataResponse", "versions", 2, kString, true},
      {"inference.ModelMetadataResponse", "platform", 3, kString, false},
      {"inference.ModelMetadataResponse", "inputs", 4, kMsg, true},
      {"inference.ModelMetadataResponse", "outputs", 5, kMsg, true},
      {"inference.ModelMetadataResponse.TensorMetadata", "name", 1, kString, false},
      {"inference.ModelMetadataResponse.TensorMetadata", "datatype", 2, kString, false},
      {"inference.ModelMetadataResponse.TensorMetadata", "shape", 3, kInt64, true},

      {"inference.ModelInferRequest", "model_name", 1, kString, false},
      {"inference.ModelInferRequest", "model_version", 2, kString, false},
      {"inference.ModelInferRequest", "id", 3, kString, false},
      {"inference.ModelInferRequest", "parameters", 4, kMsg, true},
      {"inference.ModelInferRequest", "inputs", 5, kMsg, true},
      {"inference.ModelInferRequest", "outputs", 6, kMsg, true},
      {"inference.ModelInferRequest", "raw_input_contents", 7, kBytes, true},
      {"inference.ModelInferRequest.InferInputTensor", "name", 1, kString, false},
      {"inference.ModelInferRequest.InferInputTensor", "datatype", 2, kString, false},
      {"inference.ModelInferRequest.InferInputTensor", "shape", 3, kInt64, true},
      {"inference.ModelInferRequest.InferInputTensor", "parameters", 4, kMsg, true},
      {"inference.ModelInferRequest.InferInputTensor", "contents", 5, kMsg, false},
      {"inference.ModelInferRequest.InferRequestedOutputTensor", "name", 1, kString, false},
      {"inference.ModelInferRequest.InferRequestedOutputTensor", "parameters", 2, kMsg, true},

      {"inference.ModelInferResponse", "model_name", 1, kString, false},
      {"inference.ModelInferResponse", "model_version", 2, kString, false},
      {"inference.ModelInferResponse", "id", 3, kString, false},
      {"inference.ModelInferResponse", "parameters", 4, kMsg, true},
      {"inference.ModelInferResponse", "outputs", 5, kMsg, true},
      {"inference.ModelInferResponse", "raw_output_contents", 6, kBytes, true},
      {"inference.ModelInferResponse.InferOutputTensor", "name", 1, kString, false},
      {"inference.ModelInferResponse.InferOutputTensor", "datatype", 2, kString, false},
      {"inference.ModelInferResponse.InferOutputTensor", "shape", 3, kInt64, true},
      {"inference.ModelInferResponse.InferOutputTensor", "parameters", 4, kMsg, true},
      {"inference.ModelInferResponse.InferOutputTensor", "contents", 5, kMsg, false},
      {"inference.ModelStreamInferResponse", "error_message", 1, kString, false},
      {"inference.ModelStreamInferResponse", "infer_response", 2, kMsg, false},

      {"inference.InferParameter", "bool_param", 1, kBool, false},
      {"inference.InferParameter", "int64_param", 2, kInt64, false},
      {"inference.InferParameter", "string_param", 3, kString, false},
      {"inference.InferParameter", "double_param", 4, kDouble, false},
      {"inference.InferParameter", "uint64_param", 5, kUint64, false},

      {"inference.InferTensorContents", "bool_contents", 1, kBool, true},
      {"inference.InferTensorContents", "int_contents", 2, kInt32, true},
      {"inference.InferTensorContents", "int64_contents", 3, kInt64, true},
      {"inference.InferTensorContents", "uint_contents", 4, kUint32, true},
      {"inference.InferTensorContents", "uint64_contents", 5, kUint64, true},
      {"inference.InferTensorContents", "fp32_contents", 6, kFloat, true},
      {"inference.InferTensorContents", "fp64_contents", 7, kDouble, true},
      {"inference.InferTensorContents", "bytes_contents", 8, kBytes, true},

      {"inference.ModelConfigRequest", "name", 1, kString, false},
      {"inference.ModelConfigRequest", "version", 2, kString, false},
      {"inference.ModelConfigResponse", "config", 1, kMsg, false},
  });

  // The parameter choice is one oneof named as in Triton's file.
  const Descriptor* param = Message("inference.InferParameter");
  ASSERT_EQ(param->oneof_decl_count(), 1);
  EXPECT_EQ(param->oneof_decl(0)->name(), "parameter_choice");
  EXPECT_EQ(param->oneof_decl(0)->field_count(), 5);
}

TEST(ProtoWire, StatisticsAndRepositoryMessages) {
  ExpectFields({
      {"inference.ModelStatisticsRequest", "name", 1, kString, false},
      {"inference.ModelStatisticsRequest", "version", 2, kString, false},
      {"inference.StatisticDuration", "count", 1, kUint64, false},
      {"inference.StatisticDuration", "ns", 2, kUint64, false},
      {"inference.InferStatistics", "success", 1, kMsg, false},
      {"inference.InferStatistics", "fail", 2, kMsg, false},
      {"inference.InferStatistics", "queue", 3, kMsg, false},
      {"inference.InferStatistics", "compute_input", 4, kMsg, false},
      {"inference.InferStatistics", "compute_infer", 5, kMsg, false},
      {"inference.InferStatistics", "compute_output", 6, kMsg, false},
      {"inference.InferStatistics", "cache_hit", 7, kMsg, false},
      {"inference.InferStatistics", "cache_miss", 8, kMsg, false},
      {"inference.InferResponseStatistics", "compute_infer", 1, kMsg, false},
      {"inference.InferResponseStatistics", "compute_output", 2, kMsg, false},
      {"inference.InferResponseStatistics", "success", 3, kMsg, false},
      {"inference.InferResponseStatistics", "fail", 4, kMsg, false},
      {"inference.InferResponseStatistics", "empty_response", 5, kMsg, false},
      {"inference.InferResponseStatistics", "cancel", 6, kMsg, false},
      {"inference.InferBatchStatistics", "batch_size", 1, kUint64, false},
      {"inference.InferBatchStatistics", "compute_input", 2, kMsg, false},
      {"inference.InferBatchStatistics", "compute_infer", 3, kMsg, false},
      {"inference.InferBatchStatistics", "compute_output", 4, kMsg, false},
      {"inference.MemoryUsage", "type", 1, kString, false},
      {"inference.MemoryUsage", "id", 2, kInt64, false},
      {"inference.MemoryUsage", "byte_size", 3, kUint64, false},
      {"inference.ModelStatistics", "name", 1, kString, false},
      {"inference.ModelStatistics", "version", 2, kString, false},
      {"inference.ModelStatistics", "last_inference", 3, kUint64, false},
      {"inference.ModelStatistics", "inference_count", 4, kUint64, false},
      {"inference.ModelStatistics", "execution_count", 5, kUint64, false},
      {"inference.ModelStatistics", "inference_stats", 6, kMsg, false},
      {"inference.ModelStatistics", "batch_stats", 7, kMsg, true},
      {"inference.ModelStatistics", "memory_usage", 8, kMsg, true},
      {"inference.ModelStatistics", "response_stats", 9, kMsg, true},
      {"inference.ModelStatisticsResponse", "model_stats", 1, kMsg, true},

      {"inference.ModelRepositoryParameter", "bool_param", 1, kBool, false},
      {"inference.ModelRepositoryParameter", "int64_param", 2, kInt64, false},
      {"inference.ModelRepositoryParameter", "string_param", 3, kString, false},
      {"inference.ModelRepositoryParameter", "bytes_param", 4, kBytes, false},
      {"inference.RepositoryIndexRequest", "repository_name", 1, kString, false},
      {"inference.RepositoryIndexRequest", "ready", 2, kBool, false},
      {"inference.RepositoryIndexResponse", "models", 1, kMsg, true},
      {"inference.RepositoryIndexResponse.ModelIndex", "name", 1, kString, false},
      {"inference.RepositoryIndexResponse.ModelIndex", "version", 2, kString, false},
      {"inference.RepositoryIndexResponse.ModelIndex", "state", 3, kString, false},
      {"inference.RepositoryIndexResponse.ModelIndex", "reason", 4, kString, false},
      {"inference.RepositoryModelLoadRequest", "repository_name", 1, kString, false},
      {"inference.RepositoryModelLoadRequest", "model_name", 2, kString, false},
      {"inference.RepositoryModelLoadRequest", "parameters", 3, kMsg, true},
      {"inference.RepositoryModelUnloadRequest", "repository_name", 1, kString, false},
      {"inference.RepositoryModelUnloadRequest", "model_name", 2, kString, false},
      {"inference.RepositoryModelUnloadRequest", "parameters", 3, kMsg, true},
  });
}

TEST(ProtoWire, ModelConfigMessages) {
  ExpectFields({
      {"inference.ModelConfig", "name", 1, kString, false},
      {"inference.ModelConfig", "platform", 2, kString, false},
      {"inference.ModelConfig", "version_policy", 3, kMsg, false},
      {"inference.ModelConfig", "max_batch_size", 4, kInt32, false},
      {"inference.ModelConfig", "input", 5, kMsg, true},
      {"inference.ModelConfig", "output", 6, kMsg, true},
      {"inference.ModelConfig", "instance_group", 7, kMsg, true},
      {"inference.ModelConfig", "default_model_filename", 8, kString, false},
      {"inference.ModelConfig", "cc_model_filenames", 9, kMsg, true},
      {"inference.ModelConfig", "metric_tags", 10, kMsg, true},
      {"inference.ModelConfig", "dynamic_batching", 11, kMsg, false},
      {"inference.ModelConfig", "parameters", 14, kMsg, true},
      {"inference.ModelConfig", "backend", 17, kString, false},
      {"inference.ModelConfig", "model_transaction_policy", 19, kMsg, false},
      {"inference.ModelConfig", "sequence_batching", 13, kMsg, false},
      {"inference.ModelConfig", "response_cache", 24, kMsg, false},
      {"inference.ModelConfig", "runtime", 25, kString, false},

      {"inference.ModelInput", "name", 1, kString, false},
      {"inference.ModelInput", "data_type", 2, kEnum, false},
      {"inference.ModelInput", "format", 3, kEnum, false},
      {"inference.ModelInput", "dims", 4, kInt64, true},
      {"inference.ModelInput", "reshape", 5, kMsg, false},
      {"inference.ModelInput", "is_shape_tensor", 6, kBool, false},
      {"inference.ModelInput", "allow_ragged_batch", 7, kBool, false},
      {"inference.ModelInput", "optional", 8, kBool, false},
      {"inference.ModelInput", "is_non_linear_format_io", 9, kBool, false},
      {"inference.ModelOutput", "name", 1, kString, false},
      {"inference.ModelOutput", "data_type", 2, kEnum, false},
      {"inference.ModelOutput", "dims", 3, kInt64, true},
      {"inference.ModelOutput", "label_filename", 4, kString, false},
      {"inference.ModelOutput", "reshape", 5, kMsg, false},
      {"inference.ModelOutput", "is_shape_tensor", 6, kBool, false},
      {"inference.ModelOutput", "is_non_linear_format_io", 7, kBool, false},
      {"inference.ModelTensorReshape", "shape", 1, kInt64, true},

      {"inference.ModelInstanceGroup", "name", 1, kString, false},
      {"inference.ModelInstanceGroup", "count", 2, kInt32, false},
      {"inference.ModelInstanceGroup", "gpus", 3, kInt32, true},
      {"inference.ModelInstanceGroup", "kind", 4, kEnum, false},
      {"inference.ModelInstanceGroup", "profile", 5, kString, true},
      {"inference.ModelInstanceGroup", "passive", 7, kBool, false},
      {"inference.ModelInstanceGroup", "host_policy", 9, kString, false},

      {"inference.ModelVersionPolicy", "latest", 1, kMsg, false},
      {"inference.ModelVersionPolicy", "all", 2, kMsg, false},
      {"inference.ModelVersionPolicy", "specific", 3, kMsg, false},
      {"inference.ModelVersionPolicy.Latest", "num_versions", 1, kUint32, false},
      {"inference.ModelVersionPolicy.Specific", "versions", 1, kInt64, true},

      {"inference.ModelQueuePolicy", "timeout_action", 1, kEnum, false},
      {"inference.ModelQueuePolicy", "default_timeout_microseconds", 2, kUint64, false},
      {"inference.ModelQueuePolicy", "allow_timeout_override", 3, kBool, false},
      {"inference.ModelQueuePolicy", "max_queue_size", 4, kUint32, false},
      {"inference.ModelDynamicBatching", "preferred_batch_size", 1, kInt32, true},
      {"inference.ModelDynamicBatching", "max_queue_delay_microseconds", 2, kUint64, false},
      {"inference.ModelDynamicBatching", "preserve_ordering", 3, kBool, false},
      {"inference.ModelDynamicBatching", "priority_levels", 4, kUint64, false},
      {"inference.ModelDynamicBatching", "default_priority_level", 5, kUint64, false},
      {"inference.ModelDynamicBatching", "default_queue_policy", 6, kMsg, false},
      {"inference.ModelDynamicBatching", "priority_queue_policy", 7, kMsg, true},

      {"inference.ModelParameter", "string_value", 1, kString, false},
      {"inference.ModelTransactionPolicy", "decoupled", 1, kBool, false},
      {"inference.ModelResponseCache", "enable", 1, kBool, false},
      {"inference.ModelSequenceBatching", "max_sequence_idle_microseconds", 1, kUint64, false},
      {"inference.ModelSequenceBatching", "direct", 3, kMsg, false},
  });

  // Numbers of the parts left out stay reserved, so nobody reuses them.
  const Descriptor* config = Message("inference.ModelConfig");
  for (int n : {12, 15, 16, 18, 20, 21, 23, 26}) {
    EXPECT_TRUE(config->IsReservedNumber(n)) << n;
  }
  const Descriptor* group = Message("inference.ModelInstanceGroup");
  EXPECT_TRUE(group->IsReservedNumber(6));
  EXPECT_TRUE(group->IsReservedNumber(8));
  // dynamic_batching sits in the scheduler oneof, as in Triton's file.
  const FieldDescriptor* batching = config->FindFieldByName("dynamic_batching");
  ASSERT_NE(batching->containing_oneof(), nullptr);
  EXPECT_EQ(batching->containing_oneof()->name(), "scheduling_choice");
  EXPECT_EQ(config->FindFieldByName("sequence_batching")->containing_oneof(),
            batching->containing_oneof());
}

void ExpectEnum(const EnumDescriptor* e, const std::vector<std::pair<const char*, int>>& values) {
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->value_count(), static_cast<int>(values.size())) << e->full_name();
  for (const auto& [name, number] : values) {
    const auto* v = e->FindValueByName(name);
    ASSERT_NE(v, nullptr) << e->full_name() << "." << name;
    EXPECT_EQ(v->number(), number) << e->full_name() << "." << name;
  }
}

TEST(ProtoWire, Enums) {
  ExpectEnum(inference::DataType_descriptor(),
             {{"TYPE_INVALID", 0}, {"TYPE_BOOL", 1}, {"TYPE_UINT8", 2}, {"TYPE_UINT16", 3},
              {"TYPE_UINT32", 4}, {"TYPE_UINT64", 5}, {"TYPE_INT8", 6}, {"TYPE_INT16", 7},
              {"TYPE_INT32", 8}, {"TYPE_INT64", 9}, {"TYPE_FP16", 10}, {"TYPE_FP32", 11},
              {"TYPE_FP64", 12}, {"TYPE_STRING", 13}, {"TYPE_BF16", 14}});
  EXPECT_EQ(inference::DataType_descriptor()->full_name(), "inference.DataType");
  ExpectEnum(inference::ModelInstanceGroup::Kind_descriptor(),
             {{"KIND_AUTO", 0}, {"KIND_GPU", 1}, {"KIND_CPU", 2}, {"KIND_MODEL", 3}});
  ExpectEnum(inference::ModelInput::Format_descriptor(),
             {{"FORMAT_NONE", 0}, {"FORMAT_NHWC", 1}, {"FORMAT_NCHW", 2}});
  ExpectEnum(inference::ModelQueuePolicy::TimeoutAction_descriptor(), {{"REJECT", 0}, {"DELAY", 1}});
  ExpectEnum(grpc::health::v1::HealthCheckResponse::ServingStatus_descriptor(),
             {{"UNKNOWN", 0}, {"SERVING", 1}, {"NOT_SERVING", 2}, {"SERVICE_UNKNOWN", 3}});
  ExpectFields({
      {"grpc.health.v1.HealthCheckRequest", "service", 1, kString, false},
      {"grpc.health.v1.HealthCheckResponse", "status", 1, kEnum, false},
  });
}

struct RpcFact {
  const char* name;
  const char* input;
  const char* output;
  bool client_streaming;
  bool server_streaming;
};

void ExpectService(const ServiceDescriptor* s, const std::vector<RpcFact>& rpcs) {
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->method_count(), static_cast<int>(rpcs.size()));
  for (const auto& r : rpcs) {
    SCOPED_TRACE(s->full_name() + "/" + r.name);
    const MethodDescriptor* m = s->FindMethodByName(r.name);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->input_type()->full_name(), r.input);
    EXPECT_EQ(m->output_type()->full_name(), r.output);
    EXPECT_EQ(m->client_streaming(), r.client_streaming);
    EXPECT_EQ(m->server_streaming(), r.server_streaming);
  }
}

TEST(ProtoWire, Services) {
  const ServiceDescriptor* inference_service =
      DescriptorPool::generated_pool()->FindServiceByName("inference.GRPCInferenceService");
  ASSERT_NE(inference_service, nullptr);
  EXPECT_EQ(inference::GRPCInferenceService::service_full_name(),
            std::string("inference.GRPCInferenceService"));
  ExpectService(
      inference_service,
      {
          {"ServerLive", "inference.ServerLiveRequest", "inference.ServerLiveResponse", false, false},
          {"ServerReady", "inference.ServerReadyRequest", "inference.ServerReadyResponse", false, false},
          {"ModelReady", "inference.ModelReadyRequest", "inference.ModelReadyResponse", false, false},
          {"ServerMetadata", "inference.ServerMetadataRequest", "inference.ServerMetadataResponse", false, false},
          {"ModelMetadata", "inference.ModelMetadataRequest", "inference.ModelMetadataResponse", false, false},
          {"ModelInfer", "inference.ModelInferRequest", "inference.ModelInferResponse", false, false},
          {"ModelStreamInfer", "inference.ModelInferRequest", "inference.ModelStreamInferResponse", true, true},
          {"ModelConfig", "inference.ModelConfigRequest", "inference.ModelConfigResponse", false, false},
          {"ModelStatistics", "inference.ModelStatisticsRequest", "inference.ModelStatisticsResponse", false, false},
          {"RepositoryIndex", "inference.RepositoryIndexRequest", "inference.RepositoryIndexResponse", false, false},
          {"RepositoryModelLoad", "inference.RepositoryModelLoadRequest", "inference.RepositoryModelLoadResponse",
           false, false},
          {"RepositoryModelUnload", "inference.RepositoryModelUnloadRequest",
           "inference.RepositoryModelUnloadResponse", false, false},
          {"SystemSharedMemoryStatus", "inference.SystemSharedMemoryStatusRequest",
           "inference.SystemSharedMemoryStatusResponse", false, false},
          {"SystemSharedMemoryRegister", "inference.SystemSharedMemoryRegisterRequest",
           "inference.SystemSharedMemoryRegisterResponse", false, false},
          {"SystemSharedMemoryUnregister", "inference.SystemSharedMemoryUnregisterRequest",
           "inference.SystemSharedMemoryUnregisterResponse", false, false},
          {"CudaSharedMemoryStatus", "inference.CudaSharedMemoryStatusRequest",
           "inference.CudaSharedMemoryStatusResponse", false, false},
          {"CudaSharedMemoryRegister", "inference.CudaSharedMemoryRegisterRequest",
           "inference.CudaSharedMemoryRegisterResponse", false, false},
          {"CudaSharedMemoryUnregister", "inference.CudaSharedMemoryUnregisterRequest",
           "inference.CudaSharedMemoryUnregisterResponse", false, false},
      });

  ExpectService(DescriptorPool::generated_pool()->FindServiceByName("grpc.health.v1.Health"),
                {
                    {"Check", "grpc.health.v1.HealthCheckRequest", "grpc.health.v1.HealthCheckResponse", false, false},
                    {"Watch", "grpc.health.v1.HealthCheckRequest", "grpc.health.v1.HealthCheckResponse", false, true},
                });
}

// Encodings worked out by hand from the field numbers (tag = number << 3 |
// wire type; 2 = length-delimited, 0 = varint, 1 = 64-bit).
TEST(ProtoWire, KnownEncodings) {
  inference::ModelInferRequest request;
  request.set_model_name("m");
  request.add_raw_input_contents("ab");
  EXPECT_EQ(request.SerializeAsString(), std::string("\x0a\x01m\x3a\x02" "ab", 7));

  // raw_output_contents (6) then model_name (1): order on the wire does not
  // matter to the parser.
  inference::ModelInferResponse response;
  ASSERT_TRUE(response.ParseFromString(std::string("\x32\x03xyz\x0a\x02mm", 9)));
  EXPECT_EQ(response.model_name(), "mm");
  ASSERT_EQ(response.raw_output_contents_size(), 1);
  EXPECT_EQ(response.raw_output_contents(0), "xyz");

  // InferParameter: int64_param (2) = 300, then double_param (4) = 1.0 wins
  // (last member of a oneof seen on the wire is kept).
  inference::InferParameter param;
  ASSERT_TRUE(param.ParseFromString(std::string("\x10\xac\x02", 3)));
  EXPECT_EQ(param.parameter_choice_case(), inference::InferParameter::kInt64Param);
  EXPECT_EQ(param.int64_param(), 300);
  ASSERT_TRUE(param.ParseFromString(std::string("\x10\xac\x02\x21\x00\x00\x00\x00\x00\x00\xf0\x3f", 12)));
  EXPECT_EQ(param.parameter_choice_case(), inference::InferParameter::kDoubleParam);
  EXPECT_EQ(param.double_param(), 1.0);

  // ModelConfig.max_batch_size (4) = 8; input (5) { data_type (2) = TYPE_STRING }.
  inference::ModelConfig config;
  config.set_max_batch_size(8);
  config.add_input()->set_data_type(inference::TYPE_STRING);
  EXPECT_EQ(config.SerializeAsString(), std::string("\x20\x08\x2a\x02\x10\x0d", 6));

  grpc::health::v1::HealthCheckResponse health;
  health.set_status(grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_EQ(health.SerializeAsString(), std::string("\x08\x01", 2));
}

TEST(ProtoWire, RoundTrip) {
  using google::protobuf::util::MessageDifferencer;

  inference::ModelInferRequest request;
  request.set_model_name("resnet");
  request.set_model_version("3");
  request.set_id("req-1");
  (*request.mutable_parameters())["priority"].set_uint64_param(2);
  (*request.mutable_parameters())["sequence_start"].set_bool_param(true);
  auto* input = request.add_inputs();
  input->set_name("INPUT0");
  input->set_datatype("FP32");
  input->add_shape(1);
  input->add_shape(3);
  (*input->mutable_parameters())["binary_data_size"].set_int64_param(12);
  auto* text = request.add_inputs();
  text->set_name("TEXT");
  text->set_datatype("BYTES");
  text->add_shape(2);
  text->mutable_contents()->add_bytes_contents("hello");
  text->mutable_contents()->add_bytes_contents(std::string("\0\xff", 2));
  request.add_outputs()->set_name("OUTPUT0");
  const float values[3] = {1.5f, -2.0f, 0.25f};
  request.add_raw_input_contents(std::string(reinterpret_cast<const char*>(values), sizeof(values)));

  std::string wire;
  ASSERT_TRUE(request.SerializeToString(&wire));
  inference::ModelInferRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire));
  EXPECT_TRUE(MessageDifferencer::Equals(request, parsed));
  EXPECT_EQ(parsed.inputs(1).contents().bytes_contents(1), std::string("\0\xff", 2));
  EXPECT_EQ(parsed.parameters().at("priority").uint64_param(), 2u);

  inference::ModelStreamInferResponse stream_response;
  auto* infer = stream_response.mutable_infer_response();
  infer->set_model_name("resnet");
  infer->set_id("req-1");
  auto* out = infer->add_outputs();
  out->set_name("OUTPUT0");
  out->set_datatype("INT64");
  out->add_shape(2);
  out->mutable_contents()->add_int64_contents(-7);
  out->mutable_contents()->add_int64_contents(1LL << 40);
  inference::ModelStreamInferResponse stream_parsed;
  ASSERT_TRUE(stream_parsed.ParseFromString(stream_response.SerializeAsString()));
  EXPECT_TRUE(MessageDifferencer::Equals(stream_response, stream_parsed));

  inference::ModelConfigResponse config_response;
  auto* config = config_response.mutable_config();
  config->set_name("resnet");
  config->set_backend("manypy");
  config->set_max_batch_size(16);
  config->mutable_dynamic_batching()->add_preferred_batch_size(8);
  config->mutable_dynamic_batching()->set_max_queue_delay_microseconds(100);
  auto* group = config->add_instance_group();
  group->set_kind(inference::ModelInstanceGroup::KIND_CPU);
  group->set_count(4);
  auto* in = config->add_input();
  in->set_name("INPUT0");
  in->set_data_type(inference::TYPE_BF16);
  in->add_dims(-1);
  config->mutable_version_policy()->mutable_latest()->set_num_versions(1);
  inference::ModelConfigResponse config_parsed;
  ASSERT_TRUE(config_parsed.ParseFromString(config_response.SerializeAsString()));
  EXPECT_TRUE(MessageDifferencer::Equals(config_response, config_parsed));
  EXPECT_TRUE(config_parsed.config().has_dynamic_batching());

  inference::ModelStatisticsResponse stats;
  auto* model_stats = stats.add_model_stats();
  model_stats->set_name("resnet");
  model_stats->set_inference_count(10);
  model_stats->mutable_inference_stats()->mutable_success()->set_count(10);
  model_stats->mutable_inference_stats()->mutable_success()->set_ns(123456789);
  model_stats->add_batch_stats()->set_batch_size(4);
  inference::ModelStatisticsResponse stats_parsed;
  ASSERT_TRUE(stats_parsed.ParseFromString(stats.SerializeAsString()));
  EXPECT_TRUE(MessageDifferencer::Equals(stats, stats_parsed));
}

// A minimal service over an in-process channel: the generated stubs and the
// method paths agree, and RPCs a service does not override answer
// UNIMPLEMENTED (what a stock client sees for anything manypy does not serve).
class LiveOnly final : public inference::GRPCInferenceService::Service {
 public:
  grpc::Status ServerLive(grpc::ServerContext*, const inference::ServerLiveRequest*,
                          inference::ServerLiveResponse* response) override {
    response->set_live(true);
    return grpc::Status::OK;
  }
};

TEST(ProtoWire, InProcessCall) {
  LiveOnly service;
  grpc::ServerBuilder builder;
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto stub = inference::GRPCInferenceService::NewStub(server->InProcessChannel(grpc::ChannelArguments()));

  {
    grpc::ClientContext context;
    inference::ServerLiveResponse response;
    grpc::Status status = stub->ServerLive(&context, inference::ServerLiveRequest(), &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_TRUE(response.live());
  }
  {
    grpc::ClientContext context;
    inference::ModelInferResponse response;
    grpc::Status status = stub->ModelInfer(&context, inference::ModelInferRequest(), &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  }
  server->Shutdown();
}

}  // namespace
