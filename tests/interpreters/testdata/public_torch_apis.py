# One representative call into each public submodule of torch (and of numpy
# and torchvision that the pool imports lazily), for PoolTest: run in an
# interpreter of a pool and by Debian's python3, the results must be equal.
# `results()` returns them as JSON; an API this release lacks is left out, a
# call that fails is recorded as "error: Type: message".
import json


def results():
    import numpy
    import torch
    import torchvision

    out = {}

    def rounded(value):
        return [round(float(v), 4) for v in torch.as_tensor(value).flatten().tolist()]

    def record(name, call):
        try:
            out[name] = call()
        except Exception as e:  # recorded, so the comparison names it
            out[name] = f"error: {type(e).__name__}: {e}"[:300]

    def has(module_name, attr=None):
        try:
            module = __import__(module_name, fromlist=["_"])
        except ImportError:
            return False
        return attr is None or hasattr(module, attr)

    x = torch.arange(6.0).reshape(2, 3)
    if has("torch.func", "vmap"):
        import torch.func as func
        record("torch.func.vmap", lambda: rounded(func.vmap(torch.dot)(x, x)))
        record("torch.func.grad", lambda: rounded(func.grad(lambda t: (t ** 2).sum())(x[0])))
        record("torch.func.jacrev", lambda: rounded(func.jacrev(torch.sin)(torch.zeros(2))))
        record("torch.func.functional_call", lambda: rounded(func.functional_call(
            torch.nn.Linear(2, 1), {"weight": torch.ones(1, 2), "bias": torch.zeros(1)},
            (torch.tensor([[1.0, 2.0]]),))))
    record("torch.autograd.functional", lambda: rounded(
        torch.autograd.functional.jacobian(lambda t: t ** 2, torch.tensor([1.0, 2.0]))))
    record("torch.distributions", lambda: rounded(
        torch.distributions.Normal(0.0, 1.0).log_prob(torch.tensor(0.5))))
    record("torch.distributions.kl", lambda: rounded(torch.distributions.kl_divergence(
        torch.distributions.Normal(0.0, 1.0), torch.distributions.Normal(1.0, 2.0))))
    record("torch.fft", lambda: rounded(torch.fft.rfft(torch.arange(4.0)).abs()))
    record("torch.linalg", lambda: rounded(torch.linalg.det(torch.eye(3) * 2)))
    record("torch.special", lambda: rounded(torch.special.erf(torch.tensor([0.5]))))
    record("torch.sparse", lambda: rounded(torch.sparse.sum(torch.eye(3).to_sparse())))
    record("torch.nn.functional", lambda: rounded(torch.nn.functional.softmax(x, dim=1)))
    record("torch.nn.utils.rnn", lambda: list(torch.nn.utils.rnn.pad_sequence(
        [torch.ones(2), torch.ones(3)]).shape))
    record("torch.onnx", lambda: torch.onnx.is_in_onnx_export())
    record("torch.hub", lambda: torch.hub.get_dir().endswith("hub"))
    record("torch.utils.data", lambda: [rounded(b[0]) for b in torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.arange(4.0)), batch_size=2)])
    record("torch.utils.checkpoint", lambda: rounded(
        torch.utils.checkpoint.checkpoint(lambda t: t * 2, torch.ones(2), use_reentrant=False)))
    record("torch.profiler", lambda: _profiled(torch))
    record("torch.quantization", lambda: rounded(_dynamic_quantized(torch)))
    for name in ("torch.nn.quantized", "torch.nn.quantizable", "torch.nn.qat",
                 "torch.nn.intrinsic"):
        record(name, lambda name=name: sorted(
            n for n in dir(__import__(name, fromlist=["_"])) if not n.startswith("_"))[:5])
    if has("torch.masked", "sum"):
        record("torch.masked", lambda: rounded(torch.masked.sum(
            x, dim=1, mask=torch.tensor([[True, False, True], [False, True, True]]))))
    record("torch.quasirandom", lambda: rounded(
        torch.quasirandom.SobolEngine(2, scramble=False).draw(3)))
    record("torch.jit", lambda: rounded(torch.jit.trace(lambda t: t * 3, torch.ones(2))(x[1])))
    if has("torch.export", "export"):
        record("torch.export", lambda: rounded(_exported(torch)))
    if has("torch.nested", "nested_tensor") and hasattr(torch, "jagged"):
        record("torch.nested.jagged", lambda: [rounded(t.sum()) for t in torch.nested.nested_tensor(
            [torch.ones(2, 3), torch.ones(4, 3)], layout=torch.jagged).cos().unbind()])
    if hasattr(torch, "compile"):
        record("torch.compile(backend='eager')", lambda: rounded(
            torch.compile(lambda t: torch.relu(t) * 2, backend="eager")(x - 2)))
    record("numpy.random", lambda: [round(v, 4) for v in
                                    numpy.random.default_rng(0).random(2).tolist()])
    record("numpy.fft", lambda: [round(abs(v), 4) for v in numpy.fft.fft([1.0, 2.0, 3.0])])
    record("numpy.ma", lambda: float(numpy.ma.masked_array([1, 2, 3], mask=[0, 1, 0]).sum()))
    record("numpy.polynomial", lambda: float(numpy.polynomial.Polynomial([1, 2])(3)))
    record("torchvision.ops", lambda: torchvision.ops.nms(
        torch.tensor([[0.0, 0, 1, 1], [0, 0, 1, 1]]), torch.tensor([0.9, 0.8]), 0.5).tolist())
    record("torchvision.datasets", lambda: len(torchvision.datasets.FakeData(size=3)))
    record("torchvision.io", lambda: hasattr(torchvision.io, "read_image"))
    return json.dumps(out, sort_keys=True)


def _profiled(torch):
    with torch.profiler.profile() as profiler:
        torch.ones(2) + 1
    return len(profiler.key_averages()) > 0


def _dynamic_quantized(torch):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 2))
    quantized = torch.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    return quantized(torch.ones(1, 4))


def _exported(torch):
    class Twice(torch.nn.Module):
        def forward(self, t):
            return t * 2 + 1

    return torch.export.export(Twice(), (torch.ones(2),)).module()(torch.arange(2.0))


if __name__ == "__main__":
    print(results())
