# syntax=docker/dockerfile:1.7
# fleetepi image: one image, every component (`fleetepi agent|worker|hook|...`).
#
#   docker build -t fleetepi:0.1.0 .
#   docker run --rm fleetepi:0.1.0 --help
#
# It cannot be built in this repository's CI (no container engine there); the
# Helm chart's tests render and validate the manifests that use it instead
# (docs/helm.md). Kept minimal: python:3.11-slim, the package with its
# [agent,stream,ops] extras, kubectl for the hook's Kubernetes action, a
# non-root user. The agent DaemonSet overrides the user (uid 0 with all
# capabilities dropped but two: helm/fleetepi/README.md explains why).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---------------------------------------------------------------- build: wheel
FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY fleetepi ./fleetepi
COPY agents ./agents
COPY detectors ./detectors
COPY stream ./stream
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[agent,stream,ops]"

# ---------------------------------------------------------------- kubectl (hook)
FROM ${PYTHON_IMAGE} AS kubectl
# Pinned; the checksum published next to the binary is verified.
ARG KUBECTL_VERSION=v1.33.4
ARG TARGETARCH
ADD https://dl.k8s.io/release/${KUBECTL_VERSION}/bin/linux/${TARGETARCH}/kubectl /kubectl
ADD https://dl.k8s.io/release/${KUBECTL_VERSION}/bin/linux/${TARGETARCH}/kubectl.sha256 /kubectl.sha256
RUN echo "$(cat /kubectl.sha256)  /kubectl" | sha256sum -c - && chmod 0755 /kubectl

# ---------------------------------------------------------------- runtime
FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="fleetepi" \
      org.opencontainers.image.description="Core dump epidemiology for GPU fleets" \
      org.opencontainers.image.source="https://github.com/fleetepi/fleetepi" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links=/wheels "fleetepi[agent,stream,ops]" \
 && groupadd --system --gid 10001 fleetepi \
 && useradd --system --uid 10001 --gid fleetepi --home-dir /var/lib/fleetepi --create-home --shell /usr/sbin/nologin fleetepi
COPY --from=kubectl /kubectl /usr/local/bin/kubectl
USER 10001:10001
WORKDIR /var/lib/fleetepi
# Metrics of the agent (9110), worker (9108) and hook (9109); each component binds 127.0.0.1
# unless told otherwise (--bind / metrics.address / listen).
EXPOSE 9108 9109 9110
ENTRYPOINT ["fleetepi"]
CMD ["--help"]
