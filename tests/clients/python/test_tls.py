"""manypy.client over TLS against the real manypy-server started with
--tls-cert/--tls-key/--tls-client-ca, with certificates made by the openssl
command (tests/test_util/make_test_certificates.sh): the gRPC and HTTP clients
are served with the right CA and client certificate, and refused without."""
import os
import shutil
import subprocess
import tempfile
import unittest

import numpy as np

from test_client import ServerProcess
from manypy.client import HttpInferenceClient, InferenceClient, InferenceServerError

_MAKE_CERTIFICATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "test_util",
                                  "make_test_certificates.sh")


class MutualTlsClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.certs = tempfile.mkdtemp(prefix="manypy_tls_py_")
        subprocess.run(["sh", _MAKE_CERTIFICATES, cls.certs], check=True)
        cls.server = ServerProcess(extra_args=(
            "--no-metrics", f"--tls-cert={cls.pem('server.pem')}", f"--tls-key={cls.pem('server.key')}",
            f"--tls-client-ca={cls.pem('ca.pem')}"))

    @classmethod
    def tearDownClass(cls):
        try:
            cls.server.stop_expecting_clean_exit()
        finally:
            shutil.rmtree(cls.certs, ignore_errors=True)

    @classmethod
    def pem(cls, name):
        return os.path.join(cls.certs, name)

    def client_files(self, client="client"):
        return {"root_certificates": self.pem("ca.pem"), "certificate_chain": self.pem(client + ".pem"),
                "private_key": self.pem(client + ".key")}

    def two_io(self):
        return {"INPUT_A": np.array([1, 2, 3, 4], np.float32),
                "INPUT_B": np.array([10, 20, 30, 40], np.int64)}

    def test_grpc_with_a_client_certificate_is_served(self):
        with InferenceClient(self.server.address, timeout=30, **self.client_files()) as c:
            r = c.infer("two_io", self.two_io())
            np.testing.assert_array_equal(r.as_numpy("SUM"), np.array([11, 22, 33, 44], np.float32))

    def test_https_with_a_client_certificate_is_served(self):
        for url in ("https://" + self.server.http_address, self.server.http_address):
            with HttpInferenceClient(url, timeout=30, **self.client_files()) as c:
                self.assertTrue(c.is_server_ready())
                r = c.infer("two_io", self.two_io())
                np.testing.assert_array_equal(r.as_numpy("PRODUCT"), np.array([10, 40, 90, 160], np.float32))

    def test_grpc_refused_without_the_right_certificates(self):
        cases = {"plain text": {}, "no client certificate": {"root_certificates": self.pem("ca.pem")},
                 "a foreign client certificate": self.client_files("other_client"),
                 "another CA": {**self.client_files(), "root_certificates": self.pem("other_ca.pem")}}
        for what, files in cases.items():
            with self.subTest(what), InferenceClient(self.server.address, timeout=30, **files) as c:
                with self.assertRaises(InferenceServerError) as e:
                    c.is_server_live()
                self.assertEqual(e.exception.status_code, "UNAVAILABLE")

    def test_https_refused_without_the_right_certificates(self):
        cases = {"no client certificate": {"root_certificates": self.pem("ca.pem")},
                 "a foreign client certificate": self.client_files("other_client"),
                 "another CA": {**self.client_files(), "root_certificates": self.pem("other_ca.pem")}}
        for what, files in cases.items():
            with self.subTest(what), HttpInferenceClient("https://" + self.server.http_address, timeout=30,
                                                         **files) as c:
                with self.assertRaises(InferenceServerError) as e:
                    c.is_server_live()
                self.assertEqual(e.exception.status_code, "UNAVAILABLE")
        with HttpInferenceClient("http://" + self.server.http_address, timeout=30) as c:
            with self.assertRaises(InferenceServerError):
                c.is_server_live()

    def test_bad_client_files_are_named(self):
        with self.assertRaisesRegex(ValueError, "root_certificates: cannot read .*nope.pem"):
            InferenceClient(self.server.address, root_certificates=self.pem("nope.pem"))
        with self.assertRaisesRegex(ValueError, "go together"):
            HttpInferenceClient("https://" + self.server.http_address, certificate_chain=self.pem("client.pem"))


if __name__ == "__main__":
    unittest.main()
