# A stand-in for the official redis image compose.yaml names, for a machine that cannot pull it (the image
# test builds it only then, tagged with that name): Debian bookworm's Redis 7 (redis-server, and redis-cli
# for the health check), run as the redis user in /data, the `command:` given by compose.yaml.
FROM debian:bookworm-slim
RUN apt-get update \
  && apt-get install -y --no-install-recommends redis-server \
  && rm -rf /var/lib/apt/lists/* \
  && install -d -o redis -g redis /data
COPY redis-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
WORKDIR /data
VOLUME /data
USER redis
EXPOSE 6379
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["redis-server"]
