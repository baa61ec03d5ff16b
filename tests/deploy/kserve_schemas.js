// KServe's ClusterServingRuntime / ServingRuntime (serving.kserve.io/v1alpha1)
// and InferenceService (v1beta1), as JSON schemas written from KServe's API
// reference (npm has no kubernetes-models package for KServe). Unknown fields
// are errors at every level described here; containers, volumes and resources
// are checked by the core Kubernetes validators passed in.
"use strict";

const Ajv = require("ajv");

const PROTOCOLS = ["v1", "v2", "grpc-v1", "grpc-v2"];
const stringMap = { type: "object", additionalProperties: { type: "string" } };
const metadata = {
  type: "object",
  required: ["name"],
  properties: {
    name: { type: "string", pattern: "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", maxLength: 63 },
    namespace: { type: "string" },
    labels: stringMap,
    annotations: stringMap,
  },
  additionalProperties: false,
};
// Pod-level fields a runtime or a predictor may set (PodSpec's, checked as
// types here; containers and volumes in depth by the core validators).
const podFields = {
  containers: { type: "array", items: { type: "object" } },
  volumes: { type: "array", items: { type: "object" } },
  initContainers: { type: "array", items: { type: "object" } },
  nodeSelector: stringMap,
  affinity: { type: "object" },
  tolerations: { type: "array", items: { type: "object" } },
  imagePullSecrets: { type: "array", items: { type: "object" } },
  securityContext: { type: "object" },
  serviceAccountName: { type: "string" },
  hostIPC: { type: "boolean" },
  priorityClassName: { type: "string" },
  schedulerName: { type: "string" },
};

const servingRuntimeSpec = {
  type: "object",
  required: ["containers", "supportedModelFormats"],
  properties: {
    ...podFields,
    containers: { type: "array", minItems: 1, items: { type: "object" } },
    supportedModelFormats: {
      type: "array",
      minItems: 1,
      items: {
        type: "object",
        required: ["name"],
        properties: {
          name: { type: "string", minLength: 1 },
          version: { type: "string" },
          autoSelect: { type: "boolean" },
          priority: { type: "integer", minimum: 1 },
        },
        additionalProperties: false,
      },
    },
    protocolVersions: { type: "array", items: { enum: PROTOCOLS } },
    multiModel: { type: "boolean" },
    disabled: { type: "boolean" },
    grpcEndpoint: { type: "string" },
    grpcDataEndpoint: { type: "string" },
    httpDataEndpoint: { type: "string" },
    replicas: { type: "integer", minimum: 0 },
    storageHelper: {
      type: "object",
      properties: { disabled: { type: "boolean" } },
      additionalProperties: false,
    },
    builtInAdapter: { type: "object" },
    labels: stringMap,
    annotations: stringMap,
  },
  additionalProperties: false,
};

const servingRuntime = (kind) => ({
  type: "object",
  required: ["apiVersion", "kind", "metadata", "spec"],
  properties: {
    apiVersion: { const: "serving.kserve.io/v1alpha1" },
    kind: { const: kind },
    metadata,
    spec: servingRuntimeSpec,
  },
  additionalProperties: false,
});

// The model's own fields; the rest of ModelSpec is a core Container.
const MODEL_FIELDS = ["modelFormat", "runtime", "storageUri", "protocolVersion", "storage"];
const modelSpec = {
  type: "object",
  required: ["modelFormat"],
  properties: {
    modelFormat: {
      type: "object",
      required: ["name"],
      properties: { name: { type: "string", minLength: 1 }, version: { type: "string" } },
      additionalProperties: false,
    },
    runtime: { type: "string" },
    storageUri: { type: "string", pattern: "^[a-z0-9]+://" },
    protocolVersion: { enum: PROTOCOLS },
    storage: { type: "object" },
  },
};
const predictorSpec = {
  type: "object",
  properties: {
    ...podFields,
    model: modelSpec,
    minReplicas: { type: "integer", minimum: 0 },
    maxReplicas: { type: "integer", minimum: 0 },
    scaleTarget: { type: "integer", minimum: 1 },
    scaleMetric: { enum: ["cpu", "memory", "concurrency", "rps"] },
    containerConcurrency: { type: "integer", minimum: 0 },
    timeout: { type: "integer", minimum: 0 },
    canaryTrafficPercent: { type: "integer", minimum: 0, maximum: 100 },
    logger: { type: "object" },
    batcher: { type: "object" },
    labels: stringMap,
    annotations: stringMap,
    deploymentStrategy: { type: "object" },
  },
  additionalProperties: false,
};
const inferenceService = {
  type: "object",
  required: ["apiVersion", "kind", "metadata", "spec"],
  properties: {
    apiVersion: { const: "serving.kserve.io/v1beta1" },
    kind: { const: "InferenceService" },
    metadata,
    spec: {
      type: "object",
      required: ["predictor"],
      properties: { predictor: predictorSpec, transformer: { type: "object" }, explainer: { type: "object" } },
      additionalProperties: false,
    },
  },
  additionalProperties: false,
};

const ajv = new Ajv({ allErrors: true, strict: true });
const VALIDATORS = {
  "serving.kserve.io/v1alpha1 ClusterServingRuntime": ajv.compile(servingRuntime("ClusterServingRuntime")),
  "serving.kserve.io/v1alpha1 ServingRuntime": ajv.compile(servingRuntime("ServingRuntime")),
  "serving.kserve.io/v1beta1 InferenceService": ajv.compile(inferenceService),
};

function handles(apiVersion, kind) {
  return apiVersion.startsWith("serving.kserve.io/") && `${apiVersion} ${kind}` in VALIDATORS;
}

// `core(kind, value)`: the core validator's errors for a v1 Container, Volume...
function validate(object, core) {
  const check = VALIDATORS[`${object.apiVersion} ${object.kind}`];
  if (!check) return [`no schema for ${object.apiVersion} ${object.kind}`];
  if (!check(object)) {
    return check.errors.map((e) => `${e.instancePath || "/"} ${e.message}` +
      (e.params && e.params.additionalProperty ? ` (${e.params.additionalProperty})` : ""));
  }
  const errors = [];
  const spec = object.kind === "InferenceService" ? object.spec.predictor : object.spec;
  const where = object.kind === "InferenceService" ? "/spec/predictor" : "/spec";
  (spec.containers || []).forEach((c, i) =>
    core("Container", c).forEach((e) => errors.push(`${where}/containers/${i}: ${e}`)));
  (spec.volumes || []).forEach((v, i) =>
    core("Volume", v).forEach((e) => errors.push(`${where}/volumes/${i}: ${e}`)));
  if (spec.model) {
    const container = { name: "kserve-container" };
    for (const [key, value] of Object.entries(spec.model)) {
      if (!MODEL_FIELDS.includes(key)) container[key] = value;
    }
    core("Container", container).forEach((e) => errors.push(`${where}/model: ${e}`));
  }
  return errors;
}

module.exports = { handles, validate };
