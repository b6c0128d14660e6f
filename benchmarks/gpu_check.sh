#!/usr/bin/env bash
# The project on a machine with one CUDA GPU and no internet (16 cores, Python 3.12 whose
# python3 holds PyTorch): set up from the packages there and wheels brought along, print the
# machine's versions, run the CUDA tests, then the whole default pipeline from a clean state with
# the scheduler's defaults (`python -m nlpzoo repro`: a run per core, 2 runs per GPU) under a
# wall-clock limit, and summarise it (benchmarks/gpu_check.py) into
# benchmarks/results/gpu_check.json and gpu_check.md, copied to $OUT too when OUT is set.
#
# Usage:
#   bash benchmarks/gpu_check.sh prepare  # on a machine with internet: fills .whl/ and .datasets/
#   bash benchmarks/gpu_check.sh          # on the GPU machine, from the repository's root
#
# What the GPU machine lacks. Its python3 has torch, pytorch-lightning, numpy, numba, scipy,
# pandas, scikit-learn, sentencepiece, sacrebleu, matplotlib, pyyaml, psutil, tqdm, pytest,
# threadpoolctl and packaging, but not dvc, mlflow and sacremoses. Those three and each of their
# requirements that the machine lacks travel as wheels in .whl/ (the WHEELS list below: 97
# wheels, about 47 MB), pinned to the versions of the project's tested environment. `prepare`
# fetches them for CPython 3.12 on manylinux x86-64:
#     python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#         --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
#         --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#         --platform manylinux1_x86_64 -d .whl "${WHEELS[@]}"
#     python3 -m pip wheel --no-deps -w .whl antlr4-python3-runtime==4.9.3  # hydra-core's; no wheel
# and copies the data mirror (NLPZOO_DATA_MIRROR: Brown, Multi30k and the word-vector
# benchmarks, 5 MB) to .datasets/. Both folders are git-ignored (.git/info/exclude): bring them
# along with the working tree (together about 57 MB). The GPU machine installs the wheels with
#     python3 -m pip install --no-index --no-deps --target $GPU_CHECK_SITE .whl/*.whl
# and finds them through PYTHONPATH; nlpzoo itself is read from src/ (not installed).
#
# Settings (environment):
#   GPU_CHECK_LIMIT       the pipeline's wall-clock limit in seconds (480); at the limit it is
#                         interrupted as Ctrl-C would, and the summary names what finished
#   GPU_CHECK_BUDGET      seconds for the whole check (570); the pipeline gets less than
#                         GPU_CHECK_LIMIT when less is left after the tests (20 s kept for the
#                         summary)
#   GPU_CHECK_TEST_LIMIT  seconds for the CUDA tests (300); GPU_CHECK_TESTS=0 skips them
#   GPU_CHECK_PIPELINE=0  skips the pipeline
#   GPU_CHECK_WORK        the pipeline's scratch copy of the project (/tmp/nlpzoo-gpu-check)
#   GPU_CHECK_SITE        where the wheels are installed (/tmp/nlpzoo-gpu-site)
#   GPU_CHECK_RESULTS     where the results go (benchmarks/results)
#   PYTHON                the interpreter that holds PyTorch (python3)
#   NLPZOO_DATA_MIRROR    the data mirror (default: .datasets/ of this repository)
#   JOBS, GPU_SLOTS       the scheduler's settings (default: its own)
# Exit status: 0 when the tests passed and the pipeline finished; 2 when the environment lacks
# a package (each named); 3 when the pipeline stopped at its limit and nothing failed; 1 else.

set -uo pipefail

WHEELS=(
  aiohttp-retry==2.9.1 alembic==1.20.1 amqp==5.4.2 annotated-types==0.8.0 appdirs==1.4.4
  asyncssh==2.24.1 atpublic==9.0.0 billiard==4.3.2 blinker==1.9.0 cachetools==7.3.3
  celery==5.7.0 cffi==2.1.1 click-didyoumean==0.3.1 click-plugins==1.1.1.2 click-repl==0.4.1
  configobj==5.0.9 cryptography==50.0.2 databricks-sdk==0.167.0 dictdiffer==0.10.0
  diskcache==5.6.3 distro==1.9.0 docker==7.2.0 dpath==2.2.0 dulwich==1.2.21 dvc==3.67.1
  dvc-data==3.18.3 dvc-http==2.32.0 dvc-objects==5.2.0 dvc-render==1.0.2
  dvc-studio-client==0.23.0 dvc-task==0.40.2 entrypoints==0.4.2 fastapi==0.165.0 Flask==3.1.3
  flask-cors==6.0.5 flatten-dict==0.5.0 flufl.lock==9.2.0 funcy==2.1 gitdb==4.0.12
  GitPython==3.2.1 google-auth==2.63.1 grandalf==0.8 graphene==3.4.3 graphql-core==3.2.14
  graphql-relay==3.2.0 gto==1.10.1 gunicorn==26.2.0 huey==3.5.4 hydra-core==1.3.8
  importlib_metadata==9.1.0 iterative-telemetry==0.0.10 itsdangerous==2.2.0 kombu==5.7.0
  Mako==1.4.3 mlflow==3.17.2 mlflow-skinny==3.17.2 mlflow-tracing==3.17.2 omegaconf==2.3.1
  opentelemetry-api==1.45.2 opentelemetry-proto==1.45.2 opentelemetry-sdk==1.45.2
  opentelemetry-semantic-conventions==0.66b2 orjson==3.13.0 platformdirs==4.14.9
  prettytable==3.19.0 prompt_toolkit==3.0.53 pyasn1==0.6.5 pyasn1_modules==0.4.2 pycparser==3.12
  pydantic==2.14.4 pydantic_core==2.50.5 pydantic-settings==2.16.3 pydot==4.0.1 pygit2==1.21.0
  pygtrie==2.6.2 python-dotenv==1.2.4 ruamel.yaml==0.19.1 sacremoses==0.2.0 scmrepo==3.6.2
  semver==3.2.0 shortuuid==1.0.13 shtab==1.13.0 skops==0.16.0 smmap==5.0.3 SQLAlchemy==2.1.9
  sqlparse==0.6.1 sqltrie==0.11.3 starlette==1.10.0 tomlkit==0.15.3 typing-inspection==0.4.5
  tzlocal==5.4.5 uvicorn==0.55.0 vine==5.1.0 voluptuous==0.16.0 wcwidth==0.9.5 zc.lockfile==4.0
)
SDISTS=(antlr4-python3-runtime==4.9.3)  # no wheel published: built here
PLATFORMS=(manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64
  manylinux1_x86_64)

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO" || exit 1
PY="${PYTHON:-python3}"

say() { printf '\n== %s\n' "$*"; }

prepare() {
  local exclude
  exclude="$(git rev-parse --git-path info/exclude)" || return 1
  mkdir -p "$(dirname "$exclude")"
  for folder in /.whl/ /.datasets/; do
    grep -qxF "$folder" "$exclude" 2>/dev/null || echo "$folder" >>"$exclude"
  done
  rm -rf .whl && mkdir .whl || return 1
  local platforms=()
  for p in "${PLATFORMS[@]}"; do platforms+=(--platform "$p"); done
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${platforms[@]}" -d .whl "${WHEELS[@]}" || return 1
  "$PY" -m pip wheel -q --no-deps -w .whl "${SDISTS[@]}" || return 1
  local mirror="${NLPZOO_DATA_MIRROR:-}"
  if [ -z "$mirror" ] || [ ! -d "$mirror" ]; then
    echo "error: set NLPZOO_DATA_MIRROR to the data mirror (a folder with brown.zip, multi30k/, ...)" >&2
    return 1
  fi
  rm -rf .datasets && cp -r "$mirror" .datasets && chmod -R u+w .datasets || return 1
  echo "$(ls .whl | wc -l) wheels; $(du -sh .whl | cut -f1) in .whl, $(du -sh .datasets | cut -f1) in .datasets"
}

if [ "${1:-}" = prepare ]; then
  prepare
  exit $?
fi

T0=$(date +%s)
RESULTS="${GPU_CHECK_RESULTS:-$REPO/benchmarks/results}"
mkdir -p "$RESULTS"
LIMIT="${GPU_CHECK_LIMIT:-480}"
BUDGET="${GPU_CHECK_BUDGET:-570}"
WORK="${GPU_CHECK_WORK:-/tmp/nlpzoo-gpu-check}"
SITE="${GPU_CHECK_SITE:-/tmp/nlpzoo-gpu-site}"
export PYTHONUNBUFFERED=1 NLPZOO_LOG_LEVEL="${NLPZOO_LOG_LEVEL:-WARNING}"
# no internet there: MLflow and DVC send no usage reports
export DO_NOT_TRACK=true ITERATIVE_DO_NOT_TRACK=1

# ------------------------------------------------------------------ (a) the environment
say "environment"
PY_PATH="$(command -v "$PY")" || { echo "error: no $PY on PATH" >&2; exit 2; }
if compgen -G ".whl/*.whl" >/dev/null; then
  echo "installing $(ls .whl/*.whl | wc -l) wheels from .whl/ into $SITE"
  PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 "$PY" -m pip install -q \
    --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl || { echo "error: installing .whl/ failed" >&2; exit 2; }
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
  export PATH="$SITE/bin:$PATH"
else
  echo "no .whl/ here: using the packages installed (bash benchmarks/gpu_check.sh prepare fetches them)"
fi
# `python` in the stages' commands is this interpreter
SHIM="$(mktemp -d)"
trap 'rm -rf "$SHIM"' EXIT
printf '#!/bin/sh\nexec "%s" "$@"\n' "$PY_PATH" >"$SHIM/python"
chmod +x "$SHIM/python"
export PATH="$SHIM:$PATH"
export PYTHONPATH="$REPO/src${PYTHONPATH:+:$PYTHONPATH}"
export NLPZOO_DATA_MIRROR="${NLPZOO_DATA_MIRROR:-$REPO/.datasets}"
"$PY" benchmarks/gpu_check.py --check-env --site "$SITE"
ENV_RC=$?
MISSING=""
command -v dvc >/dev/null || MISSING="the dvc command (PATH)"
[ -f "$NLPZOO_DATA_MIRROR/brown.zip" ] || MISSING="${MISSING:+$MISSING; }the data mirror at $NLPZOO_DATA_MIRROR (bash benchmarks/gpu_check.sh prepare copies it to .datasets/)"
if [ "$ENV_RC" -ne 0 ] || [ -n "$MISSING" ]; then
  [ -n "$MISSING" ] && echo "missing: $MISSING"
  echo "error: the environment is incomplete (above); bring what is missing as wheels in .whl/" >&2
  exit 2
fi

# ------------------------------------------------------------------ (b) the machine
say "machine"
nvidia-smi || echo "nvidia-smi failed"
"$PY" - <<'EOF'
import os, platform, torch
print(f"python {platform.python_version()}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
      f"cuDNN {torch.backends.cudnn.version()}, cores {len(os.sched_getaffinity(0))}")
print(f"CUDA available: {torch.cuda.is_available()}")
for i in range(torch.cuda.device_count()):
    p = torch.cuda.get_device_properties(i)
    print(f"GPU {i}: {p.name}, {p.total_memory / 2**30:.0f} GiB, compute {p.major}.{p.minor}, "
          f"{p.multi_processor_count} SMs, bf16 {torch.cuda.is_bf16_supported()}")
EOF
echo "dvc $(dvc --version)"

# ------------------------------------------------------------------ (c) the CUDA tests
TEST_ARGS=()
if [ "${GPU_CHECK_TESTS:-1}" != 0 ]; then
  say "CUDA tests (pytest -m cuda tests/gpu)"
  rm -f "$RESULTS/pytest_cuda.xml"
  timeout -s INT -k 20 "${GPU_CHECK_TEST_LIMIT:-300}" "$PY" -m pytest -m cuda tests/gpu -q \
    -p no:cacheprovider --junitxml="$RESULTS/pytest_cuda.xml" 2>&1 | tee "$RESULTS/pytest_cuda.log"
  TEST_RC=${PIPESTATUS[0]}
  TEST_ARGS=(--pytest-rc "$TEST_RC")
  [ -f "$RESULTS/pytest_cuda.xml" ] && TEST_ARGS+=(--pytest-junit "$RESULTS/pytest_cuda.xml")
else
  TEST_RC=0
fi

# ------------------------------------------------------------------ (d) the pipeline
in_work() {  # a command in the scratch copy, without this shell's MLflow and DVC settings
  (
    cd "$WORK" || exit 1
    for var in $(compgen -e); do
      case "$var" in MLFLOW_* | DVC_*) unset "$var" ;; esac
    done
    export PYTHONPATH="$WORK/src:${PYTHONPATH#"$REPO/src:"}"
    exec "$@"
  )
}
PIPE_ARGS=(--root "$REPO" --since "$T0")  # no pipeline ran: nothing of the committed run counts
PIPE_RC=0
if [ "${GPU_CHECK_PIPELINE:-1}" != 0 ]; then
  LEFT=$((BUDGET - ($(date +%s) - T0) - 20))
  PLIMIT=$((LIMIT < LEFT ? LIMIT : LEFT))
  say "pipeline: python -m nlpzoo repro in $WORK, limit ${PLIMIT} s"
  if [ "$PLIMIT" -lt 30 ]; then
    echo "no time left for the pipeline (${PLIMIT} s)"
    PIPE_RC=124
    PIPE_ARGS+=(--pipeline-rc 124 --pipeline-seconds 0 --limit "$PLIMIT")
  else
    # a clean state: the project without any output (`make clean`), the committed dvc.lock and
    # timings/ kept, as a fresh clone has them (the scheduler orders runs by those timings)
    rm -rf "$WORK" && mkdir -p "$WORK"
    tar -C "$REPO" -cf - \
      --exclude=./.git --exclude=./.venv --exclude=./.whl --exclude=./.datasets --exclude=./.dvc \
      --exclude=./data --exclude=./models --exclude=./eval --exclude=./checkpoints \
      --exclude=./metrics --exclude=./plots --exclude=./reports --exclude=./registry \
      --exclude='./mlflow.db*' --exclude=./mlruns --exclude=./mlartifacts \
      --exclude=./lightning_logs --exclude=./benchmarks/results/gpu_check.json \
      --exclude=./benchmarks/results/gpu_check.md --exclude=./benchmarks/results/pytest_cuda.xml \
      --exclude=./benchmarks/results/pytest_cuda.log --exclude=./benchmarks/results/pipeline.log \
      --exclude=__pycache__ --exclude=.pytest_cache --exclude=.ruff_cache . | tar -C "$WORK" -xf -
    in_work sh -c 'dvc init -q --no-scm && dvc config core.analytics false' ||
      { echo "error: could not set up $WORK" >&2; exit 1; }
    START=$(date +%s)
    in_work timeout -s TERM -k 60 "$PLIMIT" "$PY" -m nlpzoo repro 2>&1 | tee "$RESULTS/pipeline.log"
    PIPE_RC=${PIPESTATUS[0]}
    PIPE_SECONDS=$(($(date +%s) - START))
    PIPE_ARGS=(--root "$WORK" --since "$START" --pipeline-rc "$PIPE_RC"
      --pipeline-seconds "$PIPE_SECONDS" --limit "$PLIMIT")
  fi
fi

# ------------------------------------------------------------------ (e) the summary
say "summary"
"$PY" benchmarks/gpu_check.py "${PIPE_ARGS[@]}" ${TEST_ARGS[@]+"${TEST_ARGS[@]}"} \
  --total-seconds $(($(date +%s) - T0)) \
  --out-json "$RESULTS/gpu_check.json" --out-md "$RESULTS/gpu_check.md"
SUMMARY_RC=$?
if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then
  for f in gpu_check.json gpu_check.md pytest_cuda.log pytest_cuda.xml pipeline.log; do
    [ -f "$RESULTS/$f" ] && cp "$RESULTS/$f" "$OUT/"
  done
  [ -f "$WORK/reports/report.md" ] && cp "$WORK/reports/report.md" "$OUT/report.md"
  outputs=()
  for d in metrics timings plots registry; do [ -d "$WORK/$d" ] && outputs+=("$d"); done
  [ ${#outputs[@]} -gt 0 ] && tar -C "$WORK" -czf "$OUT/outputs.tar.gz" "${outputs[@]}"
fi
echo "whole check: $(($(date +%s) - T0)) s"

if [ "$TEST_RC" -ne 0 ] || [ "$SUMMARY_RC" -ne 0 ] || { [ "$PIPE_RC" -ne 0 ] && [ "$PIPE_RC" -ne 124 ]; }; then
  exit 1
fi
[ "$PIPE_RC" -eq 124 ] && exit 3
exit 0
