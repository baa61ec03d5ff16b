"""Checks the generated Python package manypy_proto (build/python on PYTHONPATH).

Run by CTest as proto_python_stubs with the system Python (Debian's
python3-protobuf and python3-grpcio).
"""

import sys

from manypy_proto import (
    grpc_service_pb2 as pb,
    grpc_service_pb2_grpc as pb_grpc,
    health_pb2,
    health_pb2_grpc,
    model_config_pb2,
)


def field_number(message, name):
    return message.DESCRIPTOR.fields_by_name[name].number


def main():
    # A few wire facts (Triton's grpc_service.proto / model_config.proto).
    assert pb.DESCRIPTOR.package == "inference"
    assert field_number(pb.ModelInferRequest, "inputs") == 5
    assert field_number(pb.ModelInferRequest, "raw_input_contents") == 7
    assert field_number(pb.ModelInferResponse, "raw_output_contents") == 6
    assert field_number(pb.InferParameter, "uint64_param") == 5
    assert model_config_pb2.TYPE_STRING == 13
    assert model_config_pb2.TYPE_BF16 == 14
    assert health_pb2.HealthCheckResponse.SERVING == 1

    service = pb.DESCRIPTOR.services_by_name["GRPCInferenceService"]
    assert service.full_name == "inference.GRPCInferenceService"
    expected = {
        "ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata",
        "ModelInfer", "ModelStreamInfer", "ModelConfig", "ModelStatistics",
        "RepositoryIndex", "RepositoryModelLoad", "RepositoryModelUnload",
        # Triton's shared-memory extension: the system part is served, the
        # CUDA part is declared (so Triton's clients find it) and refused.
        "SystemSharedMemoryStatus", "SystemSharedMemoryRegister",
        "SystemSharedMemoryUnregister", "CudaSharedMemoryStatus",
        "CudaSharedMemoryRegister", "CudaSharedMemoryUnregister",
    }
    assert set(service.methods_by_name) == expected, sorted(service.methods_by_name)

    # Construct, encode, decode.
    request = pb.ModelInferRequest(model_name="m")
    request.raw_input_contents.append(b"ab")
    assert request.SerializeToString() == b"\x0a\x01m\x3a\x02ab"

    request = pb.ModelInferRequest(model_name="resnet", id="r1")
    request.parameters["priority"].uint64_param = 2
    tensor = request.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 2])
    tensor.contents.fp32_contents.extend([1.5, -2.0])
    request.outputs.add(name="OUTPUT0")
    parsed = pb.ModelInferRequest.FromString(request.SerializeToString())
    assert parsed == request
    assert parsed.inputs[0].contents.fp32_contents == [1.5, -2.0]
    assert parsed.parameters["priority"].WhichOneof("parameter_choice") == "uint64_param"

    config = pb.ModelConfigResponse()
    config.config.max_batch_size = 8
    config.config.input.add(name="x", data_type=model_config_pb2.TYPE_STRING)
    assert config.config.SerializeToString() == b"\x20\x08\x2a\x05\x0a\x01x\x10\x0d"

    # The gRPC stubs exist and take a channel.
    assert hasattr(pb_grpc, "GRPCInferenceServiceStub")
    assert hasattr(pb_grpc, "GRPCInferenceServiceServicer")
    assert hasattr(pb_grpc, "add_GRPCInferenceServiceServicer_to_server")
    assert hasattr(health_pb2_grpc, "HealthStub")
    import grpc

    channel = grpc.insecure_channel("localhost:1")  # never connected
    stub = pb_grpc.GRPCInferenceServiceStub(channel)
    assert callable(stub.ModelInfer) and callable(stub.ModelStreamInfer)
    channel.close()
    print("manypy_proto Python stubs OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
