# Sourced by the GPU scripts: import this repository in place, with kernels/ mapped to
# ts_continuum.kernels as pyproject's package-dir does, on machines where nothing can be installed.
# A sitecustomize.py placed first on PYTHONPATH does the mapping (it shadows any other
# sitecustomize for these runs only). Run from the repository root.
REPO=$(pwd)
SHIM=$(mktemp -d)
trap 'rm -rf "$SHIM"' EXIT
cat > "$SHIM/sitecustomize.py" <<EOF
"""Map ts_continuum.kernels to the repository's kernels/ folder (pyproject's package-dir)."""
import importlib.util
import sys


class _RepoKernels:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != "ts_continuum.kernels":
            return None
        return importlib.util.spec_from_file_location(
            name, "$REPO/kernels/__init__.py", submodule_search_locations=["$REPO/kernels"]
        )


sys.meta_path.insert(0, _RepoKernels)
EOF
export PYTHONPATH="$SHIM:$REPO${PYTHONPATH:+:$PYTHONPATH}"
