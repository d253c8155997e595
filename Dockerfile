# onelayer container image.
#
# The build stage runs the same scripts CI runs (.ci/run -> deploy/test.sh ->
# deploy/install-deps.sh + deploy/build.sh), so the binary in the image is
# built exactly as the tested one, minus the tests. The runtime stage holds
# only the binary, the shared libraries it links (from Debian) and config/.
#
#   docker build -t onelayer:0.1.0 .
#   docker run --rm -v "$PWD/my.yaml:/etc/onelayer/onelayer.yaml:ro" \
#       -p 15001:15001 -p 9901:9901 onelayer:0.1.0
#   docker run --rm onelayer:0.1.0 --check --config /etc/onelayer/examples/edge-gateway.yaml
#
# In a container, listeners that other containers (or the host, through -p)
# must reach listen on 0.0.0.0, not 127.0.0.1.

# Build and runtime stages share one Debian point release.
ARG DEBIAN_VERSION=12.11

FROM debian:${DEBIAN_VERSION} AS build
WORKDIR /src
# Dependencies first, so this layer stays cached while sources change.
COPY deploy/install-deps.sh deploy/install-deps.sh
RUN bash deploy/install-deps.sh build
COPY . .
RUN BUILD_DIR=/src/build-image bash deploy/build.sh -DONELAYER_TESTS=OFF \
 && install -D -m 0755 -s /src/build-image/onelayer /out/onelayer

FROM debian:${DEBIAN_VERSION}-slim AS runtime
# Only the runtime shared libraries of what the build stage linked
# (libstdc++6, libgcc-s1 and libc6 are in the base image already; nghttp2
# is linked into the binary), and libssl3, which onelayer opens when a
# config asks for TLS.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libuv1 libhiredis0.14 libyaml-cpp0.7 libspdlog1.10 libfmt9 libssl3 ca-certificates iptables \
 && apt-get clean && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 onelayer \
 && useradd --system --uid 10001 --gid 10001 --no-create-home \
      --home-dir /nonexistent --shell /usr/sbin/nologin onelayer
COPY --from=build /out/onelayer /usr/local/bin/onelayer
# The transparent mode's redirect (docs/transparent.md), run by an init container.
COPY deploy/iptables.sh /usr/local/bin/onelayer-iptables
COPY config/ /etc/onelayer/
# WORKDIR + link: the CLI's default config path (config/onelayer.yaml) also
# resolves to /etc/onelayer/onelayer.yaml when arguments replace the CMD.
RUN mkdir -p /opt/onelayer && ln -s /etc/onelayer /opt/onelayer/config \
 && onelayer --version
WORKDIR /opt/onelayer

USER 10001:10001
# 15001: the proxy listener of the default config; 9901: the admin listener.
EXPOSE 15001 9901
# The image has no curl: bash opens the admin port itself. Set
# ONELAYER_ADMIN_PORT when a config moves admin.listen to another port.
ENV ONELAYER_ADMIN_PORT=9901
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/${ONELAYER_ADMIN_PORT:-9901} && printf 'GET /healthz HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nConnection: close\\r\\n\\r\\n' >&3 && read -r -t 2 _ code _ <&3 && [ \"${code%$'\\r'}\" = 200 ] || exit 1"]
# SIGTERM drains: /ready turns 503, in-flight requests finish (drain_timeout).
STOPSIGNAL SIGTERM
# Override the config with a volume on /etc/onelayer (or one file in it), or
# with arguments: docker run onelayer:0.1.0 --config /cfg/x.yaml --log-format json
ENTRYPOINT ["onelayer"]
CMD ["--config", "/etc/onelayer/onelayer.yaml"]
