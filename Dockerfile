# The animal store service as a container image (docs/deployment.md).
#
#   docker build -t animal-store .
#   docker run -d --name petstore -p 3000:3000 -v petstore-data:/data --read-only animal-store
#   docker logs petstore        # the first start prints the first API key
#
# NODE_VERSION picks the Node.js line of the official image (20, 22, 24 or 26: package.json's engines);
# by default the current LTS line, the one .ci/run tests on (LTS_LINE). 20 is past its end of life.
#   docker build --build-arg NODE_VERSION=24 -t animal-store .
ARG NODE_VERSION=26

# Build stage: every dependency, the native modules compiled, TypeScript built, then the development
# dependencies removed. Nothing of it reaches the final image but what is copied out below.
FROM node:${NODE_VERSION}-bookworm-slim AS build
# Compilers for native modules: better-sqlite3 builds from source where no prebuilt binary fits or
# can be fetched (on Node.js 20 its 12.x line, see packages/better-sqlite3-node20).
RUN apt-get update \
  && apt-get install -y --no-install-recommends python3 make g++ \
  && rm -rf /var/lib/apt/lists/*
# Compile against the headers the image ships (/usr/local/include/node) rather than download them.
ENV npm_config_nodedir=/usr/local
WORKDIR /app
COPY package.json package-lock.json ./
COPY packages/better-sqlite3-node20/package.json packages/better-sqlite3-node20/index.cjs packages/better-sqlite3-node20/
# The client (an npm workspace): `petstore listen` follows the live stream with it.
COPY packages/client/package.json packages/client/
# Dependencies first, in a layer of their own that a source change does not invalidate. Scripts run in
# the rebuild, once the tree is complete (the project's own prepare would build before src/ is here).
RUN npm ci --ignore-scripts --no-audit --no-fund && npm rebuild
COPY tsconfig.json tsconfig.build.json ./
COPY packages/client/tsconfig.json packages/client/
COPY packages/client/src/ packages/client/src/
COPY src/ src/
# The console (/console), bundled by the build's last step.
COPY console/ console/
COPY scripts/build-console.js scripts/
RUN npm run build \
  && chmod +x dist/cli/main.js \
  && npm prune --omit=dev --no-audit --no-fund \
  && rm -rf node_modules/better-sqlite3/deps node_modules/better-sqlite3/src \
    packages/better-sqlite3-node20/node_modules/better-sqlite3/deps \
    packages/better-sqlite3-node20/node_modules/better-sqlite3/src \
    packages/better-sqlite3-node20/node_modules/better-sqlite3/build/Release/obj* \
    packages/better-sqlite3-node20/node_modules/better-sqlite3/build/Release/test_extension.node \
    packages/better-sqlite3-node20/node_modules/better-sqlite3/build/Release/*.a \
    dist/.tsbuildinfo

# Final stage: the runtime dependencies and dist/, owned by root and read-only to the service, which
# runs as the image's unprivileged node user (uid 1000) and writes only to /data.
FROM node:${NODE_VERSION}-bookworm-slim
ENV NODE_ENV=production \
  HOST=0.0.0.0 \
  PORT=3000 \
  DATABASE_URL=sqlite:/data/petstore.db
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules/ node_modules/
COPY --from=build /app/packages/ packages/
COPY --from=build /app/dist/ dist/
# `petstore` on the PATH, for commands next to the service: docker exec <container> petstore keys list
RUN ln -s /app/dist/cli/main.js /usr/local/bin/petstore \
  && mkdir /data && chown node:node /data
VOLUME /data
USER node
EXPOSE 3000
# /healthz with the node binary itself: the image has no curl or wget, and needs none.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + process.env.PORT + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# node itself is process 1, so SIGTERM (docker stop) reaches the service, which drains and exits 0.
# Never npm: it would stand between the signal and the service.
ENTRYPOINT ["node", "dist/cli/main.js"]
CMD ["serve"]
