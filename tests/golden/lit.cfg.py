# lit.cfg.py: the golden tests under LLVM's lit, unchanged:
#   /usr/lib/llvm-19/build/utils/lit/lit.py -sv tests/golden [--param build=BUILD]
# ctest runs them with tests/run-golden; both read the same RUN:, REQUIRES:
# and UNSUPPORTED: lines, and this file takes tool paths, features and the
# sanitizer settings from run-golden, so the two cannot drift apart.
# docs/kfuse-check.md ("Running golden tests") says why ctest keeps run-golden.
import importlib.machinery
import importlib.util
import os

import lit.formats

here = os.path.dirname(os.path.abspath(__file__))
src = os.path.dirname(os.path.dirname(here))
loader = importlib.machinery.SourceFileLoader("run_golden", os.path.join(src, "tests", "run-golden"))
spec = importlib.util.spec_from_loader("run_golden", loader)
rg = importlib.util.module_from_spec(spec)
loader.exec_module(rg)

build = os.path.abspath(lit_config.params.get("build") or rg.default_build_dir() or os.path.join(src, "build"))
if not os.path.exists(os.path.join(build, "kfuse-opt")):
    lit_config.fatal(f"no kfuse-opt in {build}: build kfuse first, or pass --param build=BUILD")

config.name = "kfuse-golden"
# RUN lines start in the test's own directory, as run-golden runs them (a
# test may name a file beside it by a relative path)
config.test_format = lit.formats.ShTest(execute_external=True, preamble_commands=["cd %S"])
config.suffixes = list(rg.SUFFIXES)
config.excludes = list(rg.EXCLUDES) + ["lit.cfg.py"]
config.test_source_root = here
config.test_exec_root = os.path.join(build, "lit-golden")
config.pipefail = True
# the tools by name (the importer is in onnx/), LLVM's `not` and FileCheck
env = rg.environment(build)
tooldirs = sorted({os.path.dirname(p) for p in rg.tool_paths(build).values()})
llvm = "/usr/lib/llvm-19/bin"
config.environment["PATH"] = os.pathsep.join(tooldirs + [llvm, env["PATH"]])
for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "HOME", "TMPDIR", "KFUSE_CACHE_DIR"):
    if k in env:
        config.environment[k] = env[k]
config.available_features.update(rg.detect_features(lit_config.params.get("features", ""), build))
