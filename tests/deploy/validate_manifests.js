// Validates Kubernetes objects (a JSON array on stdin) against the API
// schemas, offline: the core and Prometheus Operator kinds with npm's
// kubernetes-models validators; KServe's kinds (no such package) with the
// schema in kserve_schemas.js, whose containers and volumes go through the core
// validators. Prints one line per problem; exits 1 if any, 2 on bad input.
// Run with NODE_PATH pointing at the node_modules of `npm ci` in this folder.
"use strict";

const kserve = require("./kserve_schemas.js");

// apiVersion -> module folder of its model classes.
const MODEL_ROOTS = {
  v1: "kubernetes-models/v1",
  "apps/v1": "kubernetes-models/apps/v1",
  "policy/v1": "kubernetes-models/policy/v1",
  "autoscaling/v2": "kubernetes-models/autoscaling/v2",
  "monitoring.coreos.com/v1": "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1",
};

function modelClass(root, kind) {
  try {
    return require(`${root}/${kind}`)[kind];
  } catch (e) {
    return undefined;
  }
}

function validateWith(Model, object) {
  try {
    new Model(object).validate();
    return [];
  } catch (e) {
    return [e.message];
  }
}

function validateObject(object) {
  if (object === null || typeof object !== "object" || Array.isArray(object)) {
    return ["not an object"];
  }
  const { apiVersion, kind } = object;
  if (typeof apiVersion !== "string" || typeof kind !== "string") {
    return ["apiVersion and kind are required"];
  }
  if (kserve.handles(apiVersion, kind)) {
    const core = (name, value) => {
      const Model = modelClass(MODEL_ROOTS.v1, name);
      return validateWith(Model, value);
    };
    return kserve.validate(object, core);
  }
  const root = MODEL_ROOTS[apiVersion];
  const Model = root && modelClass(root, kind);
  if (!Model) return [`no schema for ${apiVersion} ${kind}`];
  return validateWith(Model, object);
}

function main() {
  const input = require("fs").readFileSync(0, "utf8");
  let objects;
  try {
    objects = JSON.parse(input);
  } catch (e) {
    console.error(`validate_manifests: stdin is not JSON: ${e.message}`);
    process.exit(2);
  }
  if (!Array.isArray(objects) || objects.length === 0) {
    console.error("validate_manifests: expected a non-empty JSON array of objects");
    process.exit(2);
  }
  let failures = 0;
  for (const object of objects) {
    const name = `${object && object.kind}/${object && object.metadata && object.metadata.name}`;
    const errors = validateObject(object);
    for (const error of errors) console.log(`${name}: ${error}`);
    if (errors.length === 0) console.log(`${name}: valid`);
    failures += errors.length;
  }
  process.exit(failures > 0 ? 1 : 0);
}

main();
