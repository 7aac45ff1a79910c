"""Generate the gRPC/protobuf code from proto/ into src/, or check that the committed code is
exactly what the pinned generators produce (`--check`, run by `make test` and so by CI).

Outputs per .proto: `*_pb2.py`, `*_pb2_grpc.py` and typed stubs `*_pb2.pyi`, `*_pb2_grpc.pyi`
(mypy-protobuf) under src/powertrip/proto/v1/, the import path the proto path mirrors.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
PACKAGE = Path("powertrip/proto/v1")
OUTPUT_ROOT = ROOT / "src"


def generate(out_root: Path) -> list[Path]:
    """Run protoc (grpcio-tools) with the mypy-protobuf plugins; return the generated files."""
    protos = sorted((PROTO_ROOT / PACKAGE).glob("*.proto"))
    bin_dir = Path(sys.executable).parent  # the plugins live beside this interpreter
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    command = [
        sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO_ROOT}",
        f"--python_out={out_root}", f"--grpc_python_out={out_root}",
        f"--mypy_out={out_root}", f"--mypy_grpc_out={out_root}",
        *[str(p) for p in protos],
    ]  # fmt: skip
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"protoc failed:\n{result.stderr}")
    package = out_root / PACKAGE
    for folder in (package, package.parent):
        (folder / "__init__.py").touch()
    return sorted(p for p in package.iterdir() if p.is_file())


def main() -> int:
    """Generate, or with --check compare against the committed files."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if committed code differs")
    if not parser.parse_args().check:
        generate(OUTPUT_ROOT)
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        fresh = generate(Path(scratch))
        committed = OUTPUT_ROOT / PACKAGE
        problems = [
            f.name
            for f in fresh
            if not (committed / f.name).exists() or not filecmp.cmp(f, committed / f.name, False)
        ]
        extra = {p.name for p in committed.iterdir() if p.is_file()} - {f.name for f in fresh}
    if problems or extra:
        print(f"generated protobuf code is stale: {sorted(problems)} differ, {sorted(extra)} "
              "are not generated; run `make proto` and commit", file=sys.stderr)  # fmt: skip
        return 1
    print("generated protobuf code is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
