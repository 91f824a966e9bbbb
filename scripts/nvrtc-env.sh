# shellcheck shell=bash
# Source this file (do not run it): `source scripts/nvrtc-env.sh`.
#
# It makes NVRTC available to nvfuser-cuda on a machine with no CUDA toolkit, the same way
# on a developer's machine and in CI:
#   1. creates the virtual environment $REPO/.venv if it does not exist (python3 -m venv);
#   2. installs the NVRTC wheel nvidia-cuda-nvrtc==$NVFUSER_NVRTC_WHEEL into it, unless that
#      exact version is already there;
#   3. exports LD_LIBRARY_PATH with the wheel's lib directory (the dynamic loader reads it
#      once, at process start) and NVFUSER_NVRTC_LIB_DIR with the same directory
#      (nvfuser-cuda opens the libraries from there when the search path has none).
# Sourcing it again changes nothing. It works under `set -euo pipefail` and in an
# interactive shell alike; on failure it prints why and returns non-zero.

_nvf_nvrtc_env() {
    local wheel_version="13.0.88"
    local repo venv python purelib libdir
    repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)" || return 1
    venv="$repo/.venv"
    python="$venv/bin/python"

    if [ ! -x "$python" ]; then
        echo "nvrtc-env: creating $venv" >&2
        python3 -m venv "$venv" || {
            echo "nvrtc-env: 'python3 -m venv' failed (on Debian: apt-get install python3-venv)" >&2
            return 1
        }
    fi
    purelib="$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" || return 1
    if [ ! -d "$purelib/nvidia_cuda_nvrtc-$wheel_version.dist-info" ]; then
        echo "nvrtc-env: installing nvidia-cuda-nvrtc==$wheel_version into $venv" >&2
        "$python" -m pip install --quiet --disable-pip-version-check \
            "nvidia-cuda-nvrtc==$wheel_version" || {
            echo "nvrtc-env: pip could not install nvidia-cuda-nvrtc==$wheel_version" >&2
            return 1
        }
    fi
    # CUDA 13 wheels put the libraries in nvidia/cu13/lib.
    libdir="$purelib/nvidia/cu13/lib"
    if [ ! -f "$libdir/libnvrtc.so.13" ]; then
        echo "nvrtc-env: expected $libdir/libnvrtc.so.13 after installing the wheel" >&2
        return 1
    fi
    case ":${LD_LIBRARY_PATH:-}:" in
        *":$libdir:"*) ;;
        *) export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
    esac
    export NVFUSER_NVRTC_LIB_DIR="$libdir"
    export NVFUSER_NVRTC_WHEEL="$wheel_version"
}

_nvf_nvrtc_env
_nvf_nvrtc_status=$?
unset -f _nvf_nvrtc_env
# `return` works when sourced; the `exit` is only for someone who ran the file directly.
# shellcheck disable=SC2317
return "$_nvf_nvrtc_status" 2>/dev/null || exit "$_nvf_nvrtc_status"
