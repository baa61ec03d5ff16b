"""Models that crash the server process on purpose, for the crash tests
(tests/server/crash_e2e_test.cc): native code that a Python exception cannot
contain. Packaged by make_server_test_models.py into the test repository's
crashes/ folder, away from the models other tests load."""
import ctypes
import sys

import torch


def read_null_pointer():
    # ctypes.string_at(0) reads a C string at address 0: SIGSEGV in libc.
    return ctypes.string_at(0)


def abort_in_libc():
    # libc's abort(): SIGABRT raised from native code.
    ctypes.CDLL(None).abort()


def overflow_native_stack():
    # glibc's regcomp parses nested groups recursively, with no depth bound:
    # 200,000 of them overflow any thread's stack (SIGSEGV, in native code
    # that Python's recursion guards never see).
    depth = 200_000
    pattern = b"(" * depth + b"a" + b")" * depth
    compiled = ctypes.create_string_buffer(512)  # a regex_t, with room to spare
    ctypes.CDLL(None).regcomp(compiled, pattern, 1)  # REG_EXTENDED


class NullRead(torch.nn.Module):
    """x * 2, except when the first element is exactly 1: a null pointer read."""

    def forward(self, x):
        if float(x[0]) == 1:
            read_null_pointer()
        return x * 2


class NativeAbort(torch.nn.Module):
    """x * 2, except when the first element is exactly 1: abort() in libc."""

    def forward(self, x):
        if float(x[0]) == 1:
            abort_in_libc()
        return x * 2


class StackOverflow(torch.nn.Module):
    """x * 2, except when the first element is exactly 1: a native recursion
    that overflows the stack of the thread running it."""

    def forward(self, x):
        if float(x[0]) == 1:
            overflow_native_stack()
        return x * 2


class CrashesAtLoad(torch.nn.Module):
    """Exports and runs anywhere, but reads a null pointer while being
    unpickled inside a manypy interpreter (where the host's `_manypy` module
    exists): every start of the server crashes until it is quarantined."""

    def __setstate__(self, state):
        if "_manypy" in sys.modules:  # torch.package: look, don't import
            read_null_pointer()
        return super().__setstate__(state)

    def forward(self, x):
        return x * 2
