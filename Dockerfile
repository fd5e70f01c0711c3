# syntax=docker/dockerfile:1.7
# The csm service image, in two flavours from one recipe:
#   docker build -t csm-service .                                # gpu (default): CUDA 13 + CuPy
#   docker build -t csm-service:cpu --build-arg FLAVOR=cpu .     # no CUDA, CPU backend only
# Both run `csm serve` as a non-root user, answer a healthcheck on /readyz, and keep the
# compiled-kernel caches (CuPy and Numba) on the volume /var/cache/csm so that restarts do
# not compile again.

ARG FLAVOR=gpu
ARG PYTHON_IMAGE=python:3.12-slim-bookworm
ARG CUDA_IMAGE=nvidia/cuda:13.0.2-runtime-ubuntu24.04

# -- build the wheel once ---------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS wheel
WORKDIR /src
COPY pyproject.toml README.md ./
COPY gpu ./gpu
COPY streams ./streams
COPY service ./service
RUN pip wheel --no-deps --wheel-dir /wheels .

# -- what differs: the base, where Python comes from, the backend ------------------------
FROM ${PYTHON_IMAGE} AS cpu-base
ENV CSM_BACKEND=cpu CSM_EXTRA=""

FROM ${CUDA_IMAGE} AS gpu-base
ENV CSM_BACKEND=gpu CSM_EXTRA="[gpu]" \
    NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    PATH=/opt/csm/bin:$PATH
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/csm

# -- the rest is shared -----------------------------------------------------------------
FROM ${FLAVOR}-base AS final
ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    CUPY_CACHE_DIR=/var/cache/csm/cupy \
    NUMBA_CACHE_DIR=/var/cache/csm/numba \
    CSM_HOST=0.0.0.0 \
    CSM_PORT=8000
RUN useradd --system --uid 10001 --create-home --home-dir /home/csm csm \
    && install -d -o csm -g csm /var/cache/csm /var/cache/csm/cupy /var/cache/csm/numba
COPY --from=wheel /wheels /wheels
RUN WHL=$(ls /wheels/*.whl) && pip install "${WHL}${CSM_EXTRA}" && rm -rf /wheels
USER csm
# compile the CPU kernels now: a new cache volume starts with this image's content
RUN python -c "from gpu import warm_up; warm_up('cpu')"
VOLUME ["/var/cache/csm"]
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=2)"]
ENTRYPOINT ["csm"]
CMD ["serve"]
