"""deploy/docker/Dockerfile read without a container engine: Debian 12 in every
stage, packages only through tools/install-deps.sh from the one list
(tools/debian-packages.txt), a runtime stage without compilers or -dev
packages, a non-root user, the ports, the model mount and the health check;
and tools/runtime-packages.sh on the server this tree built."""
import os
import re
import subprocess
import unittest

import deploy_util as d

COMPILERS = re.compile(r"^(build-essential|cmake|ninja-build|ccache|gcc(-\d+)?|g\+\+(-\d+)?|clang.*|cpp(-\d+)?|"
                       r"make|pkg-config|protobuf-compiler.*)$")


class Dockerfile(unittest.TestCase):
    def setUp(self):
        self.image = d.Dockerfile()

    def test_debian13_by_default_debian12_by_build_arg(self):
        self.assertGreaterEqual(len(self.image.stages), 2)
        with open(d.DOCKERFILE) as f:
            before_first_stage = f.read().split("\nFROM ", 1)[0]
        self.assertRegex(before_first_stage, r"(?m)^ARG DEBIAN_RELEASE=13$")
        self.assertIn("--build-arg DEBIAN_RELEASE=12", before_first_stage)
        for source, _ in self.image.stages:
            self.assertEqual(source.split()[0], "debian:${DEBIAN_RELEASE}", source)
        self.assertEqual(self.image.stages[-1][0].split()[-1], "runtime")

    def test_packages_only_from_the_one_list(self):
        run_lines = [r for _, instructions in self.image.stages for w, r in instructions if w == "RUN"]
        # No package named in the Dockerfile: apt only through install-deps.sh.
        for line in run_lines:
            self.assertNotRegex(line, r"apt-get\s+install|apt\s+install|dpkg\s+-i", line)
        build, runtime = self.image.instructions("RUN", 0), self.image.instructions("RUN")
        self.assertTrue(any("tools/install-deps.sh --image-build" in r for r in build), build)
        self.assertTrue(any("install-deps.sh --runtime $(cat " in r for r in runtime), runtime)
        self.assertTrue(any("tools/runtime-packages.sh" in r for r in build), build)
        copied = " ".join(self.image.instructions("COPY"))
        self.assertIn("tools/debian-packages.txt", copied)

    def test_install_deps_selections_equal_the_list(self):
        for release in ("12", "13", "14"):
            listed = [(n, w) for n, w in d.package_list()
                      if not any(x.startswith("release=") and x != "release=" + release for x in w)]
            env = {"MANYPY_DEBIAN_RELEASE": release}
            self.assertEqual(d.install_deps_list(env=env), [n for n, _ in listed])
            self.assertEqual(d.install_deps_list("--image-build", env=env),
                             [n for n, w in listed if "test" not in w])
            self.assertEqual(d.install_deps_list("--runtime", "libextra1", env=env),
                             [n for n, w in listed if "runtime" in w] + ["libextra1"])
        for name, words in d.package_list():
            self.assertLessEqual(words, {"runtime", "test", "release=12", "release=13", "release=14"}
                                 | {w for w in words if w.startswith("command=")})

    def test_install_deps_picks_each_releases_libpython(self):
        self.assertIn("libpython3.11-dev", d.install_deps_list(env={"MANYPY_DEBIAN_RELEASE": "12"}))
        self.assertNotIn("libpython3.13-dev", d.install_deps_list(env={"MANYPY_DEBIAN_RELEASE": "12"}))
        self.assertIn("libpython3.13-dev", d.install_deps_list(env={"MANYPY_DEBIAN_RELEASE": "13"}))
        self.assertIn("libpython3.14-dev", d.install_deps_list(env={"MANYPY_DEBIAN_RELEASE": "14"}))
        self.assertNotIn("libpython3.13-dev", d.install_deps_list(env={"MANYPY_DEBIAN_RELEASE": "14"}))
        r = subprocess.run(["bash", os.path.join(d.SOURCE, "tools", "install-deps.sh"), "--list"],
                           env={**os.environ, "MANYPY_DEBIAN_RELEASE": "11"}, capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("Debian release '11'", r.stderr)

    def test_runtime_selection_has_no_compiler_or_dev_package(self):
        runtime = d.install_deps_list("--runtime")
        self.assertIn("python3-torch", runtime)
        for name in runtime:
            self.assertFalse(name.endswith("-dev") or COMPILERS.match(name), name)

    def test_runtime_stage(self):
        cmd = self.image.command_line()
        self.assertEqual(cmd[0], "/opt/manypy/bin/manypy-server")
        f = d.flags(cmd[1:])
        self.assertEqual(f["model-repository"], "/models")
        self.assertNotIn("interpreters", f)
        user = self.image.instructions("USER")
        self.assertEqual(len(user), 1)
        uid = user[0].split(":")[0]
        self.assertTrue(uid.isdigit() and int(uid) != 0, user)
        exposed = " ".join(self.image.instructions("EXPOSE")).split()
        self.assertEqual(sorted(exposed), ["8000", "8001", "8002"])
        run = " ".join(self.image.instructions("RUN"))
        self.assertIn(f"chown manypy:manypy {f['cache-dir']}", run)
        self.assertRegex(run, r"useradd .*--uid " + uid)
        self.assertIn("mkdir -p /models", run)
        health = self.image.instructions("HEALTHCHECK")
        self.assertEqual(len(health), 1)
        self.assertIn("http://127.0.0.1:8000/v2/health/ready", health[0])
        # The shim where the server looks for it: ../lib beside bin/.
        copies = " ".join(self.image.instructions("COPY"))
        self.assertIn("/stage/opt/manypy /opt/manypy", copies)
        build_run = " ".join(self.image.instructions("RUN", 0))
        self.assertIn("/stage/opt/manypy/bin/", build_run)
        # The serving binary the launcher runs: ../libexec/manypy-serving beside bin/.
        self.assertIn("libexec/manypy-serving /stage/opt/manypy/libexec/", build_run)
        self.assertIn("libmanypy_shim.so /stage/opt/manypy/lib/", build_run)

    def test_dockerignore_keeps_build_trees_out(self):
        with open(os.path.join(d.SOURCE, ".dockerignore")) as f:
            ignored = f.read().split()
        self.assertIn(".git", ignored)
        self.assertIn("build*/", ignored)


class RuntimePackages(unittest.TestCase):
    def test_runtime_packages_of_the_built_server(self):
        server = os.environ["MANYPY_SERVER_BINARY"]
        prefix = os.path.dirname(os.path.dirname(server))
        shim = os.path.join(prefix, "lib", "libmanypy_shim.so")
        serving = os.path.join(prefix, "libexec", "manypy-serving")
        libpython = subprocess.run(
            ["/usr/bin/python3", "-c", "import sysconfig as s; "
             "print(s.get_config_var('LIBDIR') + '/' + s.get_config_var('INSTSONAME'))"],
            check=True, capture_output=True, text=True).stdout.strip()
        r = subprocess.run(["bash", os.path.join(d.SOURCE, "tools", "runtime-packages.sh"), server, serving, shim, libpython],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        packages = [p.split(":")[0] for p in r.stdout.split()]
        import torch  # noqa: the libtorch and libpython of this release (Debian 12 or 13)
        import sys
        release = {"libtorch": "libtorch" + ".".join(torch.__version__.split(".")[:2]),
                   "libpython": "libpython%d.%d" % sys.version_info[:2]}
        for needed in (release["libtorch"], release["libpython"], "libgrpc++1.51", "libzip", "libstdc++6"):
            self.assertTrue(any(p == needed or p.startswith(needed) for p in packages), (needed, packages))
        for name in packages:
            self.assertFalse(name.endswith("-dev") or COMPILERS.match(name), name)

    def test_a_file_no_package_owns_fails(self):
        r = subprocess.run(["bash", os.path.join(d.SOURCE, "tools", "runtime-packages.sh"), "/nonexistent/x"],
                           capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)


if __name__ == "__main__":
    unittest.main()
