# The errors the model runtime raises for the host to tell apart. Each is
# named as the package's (manypy_model_runtime.MissingModulesError, ...):
# python_model.cc matches the first two by that name, and messages show it.


class MissingModulesError(ImportError):
    """The archive needs modules from the server's Python (its extern
    modules) that cannot be imported here. PythonModel::Load turns it into
    FAILED_PRECONDITION."""

    __module__ = "manypy_model_runtime"


class CompileToolchainError(RuntimeError):
    """A torch.compile'd model on a server that lacks what Inductor compiles
    its kernels with. PythonModel::Load turns it into FAILED_PRECONDITION."""

    __module__ = "manypy_model_runtime"


class ModelOutputError(RuntimeError):
    """The model's result does not give the outputs its manifest declares
    (the server answers INTERNAL naming the output)."""

    __module__ = "manypy_model_runtime"
