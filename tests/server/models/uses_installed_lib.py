"""A model whose own code imports a library installed in the packaging
Python's site-packages: export externs such a library by default, so the
server must provide it. make_server_test_models.py installs
`manypy_test_installed_lib` into a temporary site-packages folder only while
it exports, so the server's Python lacks it and must refuse the archive,
naming the module, when it loads it."""
import torch

import manypy_test_installed_lib


class UsesInstalledLib(torch.nn.Module):
    def forward(self, x):
        return manypy_test_installed_lib.triple(x)
