# commprof's startup module for PyTorch jobs (docs/torch.md). `commprof
# record` puts its directory first on PYTHONPATH; it installs the recorder
# for torch.distributed and then runs the sitecustomize the user already
# had, if any, so that nothing of theirs is lost.
import os
import sys


def _commprof_chain():
    here = os.path.dirname(os.path.abspath(__file__))
    import importlib.machinery
    import importlib.util
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = mod
    spec.loader.exec_module(mod)


try:
    if os.environ.get("COMMPROF_TRACE_DIR"):
        import commprof_torch
        commprof_torch.install()
except Exception as _e:  # never stop the user's program
    sys.stderr.write("commprof: the PyTorch recorder was not installed: %r\n" % (_e,))
_commprof_chain()
