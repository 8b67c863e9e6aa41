# The API + realtime gateway + cluster runner in one process (server mode needs DATABASE_URL).
FROM node:20-bookworm-slim

WORKDIR /app
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    DATA_DIR=/app/data

# Native addons (argon2, uWS) ship prebuilt binaries for linux-x64 glibc; python3/make/g++ only
# cover an optional dependency that builds from source when no prebuilt fits.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*

COPY package.json package-lock.json ./
# tsx runs the TypeScript sources directly; dev dependencies (vitest, deno) stay out of the image.
RUN npm ci --omit=dev --no-audit --no-fund

COPY tsconfig.json ./
COPY src ./src
COPY cluster ./cluster
COPY migrations ./migrations

# 8080 HTTP API, 8081 realtime (WebSocket), 34431 cluster runner (RUNNER_PORT)
EXPOSE 8080 8081 34431
RUN mkdir -p /app/data /app/storage && chown node:node /app/data /app/storage
USER node
CMD ["npm", "start"]
