# The API + realtime gateway + cluster runner in one process (server mode needs DATABASE_URL).
# The same filesystem CI builds without Docker and starts the server in (scripts/rootfs.sh, see
# docs/container.md): Debian 13 "trixie" (glibc 2.41, which the Node 24 build of uWebSockets.js needs),
# ca-certificates and tini from Debian, the Node pinned in package.json (24.21.0, no npm), the app with
# `npm ci --omit=dev`. Voice notes use the static ffmpeg of @ffmpeg-installer (Debian's ffmpeg would add
# about 470 MB and several minutes to every filesystem build).
#
# Base images by tag: this project's machines reach no container registry, so no digest can be read or
# checked there. To pin, set the digests at build time:
#   docker build --build-arg DEBIAN=debian:trixie-slim@sha256:… --build-arg NODE=node:24.21.0-trixie-slim@sha256:… .
ARG DEBIAN=debian:trixie-slim
ARG NODE=node:24.21.0-trixie-slim

# Installs the dependencies only; the Node binary is the one thing the final image takes from it besides them.
FROM ${NODE} AS build
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
RUN npm ci --omit=dev --no-audit --no-fund --nodedir=/usr/local \
 # uWS keeps only this platform's binary for Node 24 (ABI 137).
 && find node_modules/@btc-vision/uwebsockets.js -name '*.node' ! -name 'uws_linux_x64_137.node' -delete

FROM ${DEBIAN}
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates tini \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 1000 --create-home --home-dir /home/node node
COPY --from=build /usr/local/bin/node /usr/local/bin/node
WORKDIR /app
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    DATA_DIR=/app/data
COPY --from=build /app/node_modules ./node_modules
COPY package.json tsconfig.json ./
COPY src ./src
COPY cluster ./cluster
COPY migrations ./migrations

# 8080 HTTP API, 8081 realtime (WebSocket), 9464 metrics (/metrics, private network only), 34431 cluster runner
EXPOSE 8080 8081 9464 34431
RUN mkdir -p /app/data /app/storage && chown node:node /app/data /app/storage && chmod 0700 /app/data
USER node
# tini is PID 1: it reaps orphaned children (ffmpeg of voice notes) and passes SIGTERM to node,
# which drains (≤ 10 s) and exits 0. No npm or shell in between.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/tini", "--"]
# The command of `npm start`: Node runs the TypeScript itself; the young generation is kept small (docs/operations.md, Footprint).
CMD ["node", "--max-semi-space-size=8", "src/main.ts"]
