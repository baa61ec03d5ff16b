"""Shared by the deploy/ checks: rendering kustomizations, schema validation,
reading the Dockerfile and the container command lines of every manifest."""
import json
import os
import re
import subprocess

import yaml

SOURCE = os.environ.get("MANYPY_SOURCE_DIR",
                        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DEPLOY = os.path.join(SOURCE, "deploy")
KUBERNETES = os.path.join(DEPLOY, "kubernetes")
KSERVE = os.path.join(DEPLOY, "kserve")
DOCKERFILE = os.path.join(DEPLOY, "docker", "Dockerfile")
PACKAGE_LIST = os.path.join(SOURCE, "tools", "debian-packages.txt")
HERE = os.path.dirname(os.path.abspath(__file__))


def kustomizations():
    """Every folder under deploy/kubernetes with a kustomization.yaml."""
    found = []
    for root, _, files in os.walk(KUBERNETES):
        if "kustomization.yaml" in files:
            found.append(root)
    return sorted(found)


def render(folder):
    """`kubectl kustomize FOLDER` as a list of objects (no cluster needed)."""
    kubectl = os.environ.get("KUBECTL", "kubectl")
    out = subprocess.run([kubectl, "kustomize", folder], check=True, capture_output=True, text=True)
    return [d for d in yaml.safe_load_all(out.stdout) if d is not None]


def load_yaml(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def validate(objects):
    """Runs validate_manifests.js (npm's kubernetes-models); returns (ok, output)."""
    env = dict(os.environ)
    env["NODE_PATH"] = os.environ["MANYPY_DEPLOY_NODE_MODULES"]
    r = subprocess.run([os.environ.get("NODE", "node"), os.path.join(HERE, "validate_manifests.js")],
                       input=json.dumps(objects), capture_output=True, text=True, env=env)
    return r.returncode == 0, r.stdout + r.stderr


def find(objects, kind, name=None):
    matches = [o for o in objects if o.get("kind") == kind and (name is None or o["metadata"]["name"] == name)]
    if len(matches) != 1:
        raise AssertionError(f"expected one {kind} {name or ''}, found {len(matches)}")
    return matches[0]


def flags(args):
    """{"http-port": "8000", ...} from ["--http-port=8000", ...] (every flag in = form)."""
    out = {}
    for a in args:
        m = re.fullmatch(r"--([a-z-]+)=(.*)", a)
        if not m:
            raise AssertionError(f"container argument {a!r} is not --flag=value")
        out[m.group(1)] = m.group(2)
    return out


class Dockerfile:
    """The instructions of deploy/docker/Dockerfile, stage by stage."""

    def __init__(self, path=DOCKERFILE):
        with open(path) as f:
            text = f.read()
        logical, current = [], ""
        for line in text.splitlines():
            if not current and (not line.strip() or line.lstrip().startswith("#")):
                continue
            if line.rstrip().endswith("\\"):
                current += line.rstrip()[:-1] + " "
                continue
            if current and line.lstrip().startswith("#"):
                continue
            logical.append(current + line)
            current = ""
        self.stages = []  # [(from line, [(INSTRUCTION, rest)])]
        for line in logical:
            word, _, rest = line.strip().partition(" ")
            word = word.upper()
            if word == "FROM":
                self.stages.append((rest.strip(), []))
            elif self.stages:
                self.stages[-1][1].append((word, rest.strip()))

    def instructions(self, word, stage=-1):
        return [rest for w, rest in self.stages[stage][1] if w == word]

    def exec_form(self, word):
        """The final stage's ENTRYPOINT or CMD in JSON (exec) form."""
        values = self.instructions(word)
        if len(values) != 1:
            raise AssertionError(f"expected one {word} in the runtime stage, found {len(values)}")
        return json.loads(values[0])

    def command_line(self):
        return self.exec_form("ENTRYPOINT") + self.exec_form("CMD")


def package_list():
    """[(package, {words})] from tools/debian-packages.txt, parsed here on its own."""
    out = []
    with open(PACKAGE_LIST) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, *words = line.split()
            out.append((name, set(words)))
    return out


def install_deps_list(*args, env=None):
    r = subprocess.run(["bash", os.path.join(SOURCE, "tools", "install-deps.sh"), "--list", *args],
                       check=True, capture_output=True, text=True, env={**os.environ, **(env or {})})
    return r.stdout.split()


def container_specs():
    """(label, argv, container, pod spec or None) for every way deploy/ starts the
    server: the image's own ENTRYPOINT + CMD, each rendered Deployment's
    container (entrypoint from the image, args from the manifest) and each KServe
    serving runtime's container."""
    image = Dockerfile()
    entrypoint = image.exec_form("ENTRYPOINT")
    specs = [("Dockerfile", image.command_line(), None, None)]
    for folder in kustomizations():
        for o in render(folder):
            if o["kind"] == "Deployment":
                pod = o["spec"]["template"]["spec"]
                c = next(c for c in pod["containers"] if "manypy-server" in c["image"])
                argv = (c.get("command") or entrypoint) + c.get("args", [])
                specs.append((f"{os.path.relpath(folder, SOURCE)} Deployment", argv, c, pod))
    for name in sorted(os.listdir(KSERVE)):
        for o in load_yaml(os.path.join(KSERVE, name)):
            if o["kind"] in ("ClusterServingRuntime", "ServingRuntime"):
                c = o["spec"]["containers"][0]
                argv = (c.get("command") or entrypoint) + c.get("args", [])
                specs.append((f"deploy/kserve/{name}", argv, c, o["spec"]))
    return specs
