# The API + realtime gateway + cluster runner in one process (server mode needs DATABASE_URL).
# Node 24 (the major pinned in package.json) on Debian 13 "trixie": glibc 2.41, new enough for
# uWebSockets.js builds for Node 24; the package in use ships none for Node 24, so the gateway
# runs on `ws` unless one is supplied (see README, "Realtime engines").

FROM node:24-trixie-slim AS build
WORKDIR /app
# Only for a dependency that has no prebuilt binary for linux-x64 glibc; none of them stay in the final image.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json .npmrc ./
# The image's own Node headers (the pinned `node` package is a dev dependency and not installed here).
RUN npm ci --omit=dev --no-audit --no-fund --nodedir=/usr/local \
 # Debian's ffmpeg replaces the 2018 static build; uWS keeps only this platform's binaries.
 && rm -rf node_modules/@ffmpeg-installer/linux-x64 \
 && find node_modules/@btc-vision/uwebsockets.js -name '*.node' ! -name 'uws_linux_x64_137.node' -delete

FROM node:24-trixie-slim
WORKDIR /app
RUN apt-get update \
 && apt-get install -y --no-install-recommends ffmpeg \
 && rm -rf /var/lib/apt/lists/*
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    DATA_DIR=/app/data \
    FFMPEG_PATH=/usr/bin/ffmpeg
COPY --from=build /app/node_modules ./node_modules
COPY package.json tsconfig.json ./
COPY src ./src
COPY cluster ./cluster
COPY migrations ./migrations

# 8080 HTTP API, 8081 realtime (WebSocket), 34431 cluster runner (RUNNER_PORT)
EXPOSE 8080 8081 34431
RUN mkdir -p /app/data /app/storage && chown node:node /app/data /app/storage
USER node
# node is PID 1, with no npm or shell in between: SIGTERM reaches the server, which drains (≤ 10 s) and exits 0.
STOPSIGNAL SIGTERM
CMD ["node", "--import", "tsx", "src/main.ts"]
