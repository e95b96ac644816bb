# A stand-in for the official postgres image compose.yaml names, for a machine that cannot pull it (the
# image test builds it only then, tagged with that name). PostgreSQL 17 as Debian packages it: trixie's,
# as bookworm has 15 only. What compose.yaml relies on, done as the official image does it: the first
# start of an empty /var/lib/postgresql/data (the volume) makes a cluster with POSTGRES_USER,
# POSTGRES_PASSWORD and POSTGRES_DB (postgres-entrypoint.sh); the server listens on every address, port
# 5432, with passwords (scram-sha-256) asked of every client over the network; pg_isready is on the PATH.
FROM debian:trixie-slim
# The cluster is made at first start, in the volume: not by the package's postinst, in the image.
RUN apt-get update \
  && apt-get install -y --no-install-recommends postgresql-common \
  && sed -ri 's/#(create_main_cluster) .*$/\1 = false/' /etc/postgresql-common/createcluster.conf \
  && apt-get install -y --no-install-recommends postgresql-17 \
  && rm -rf /var/lib/apt/lists/* \
  && sed -ri "s!^#?(listen_addresses)\s*=\s*\S+.*!\1 = '*'!" /usr/share/postgresql/17/postgresql.conf.sample \
  && install -d -o postgres -g postgres -m 700 /var/lib/postgresql/data \
  && install -d -o postgres -g postgres -m 2775 /var/run/postgresql
ENV PATH=/usr/lib/postgresql/17/bin:$PATH \
  PGDATA=/var/lib/postgresql/data \
  LANG=C.UTF-8
COPY postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
# A new volume takes this directory's owner (postgres) and mode, so the server runs as postgres throughout.
VOLUME /var/lib/postgresql/data
USER postgres
# SIGINT: PostgreSQL's fast shutdown (what `docker stop` and `docker compose down` send; the official
# image's choice). Clients are disconnected, everything committed is on disk, and the next start needs no
# recovery. SIGTERM would be the smart shutdown, waiting for every client to leave, past Docker's patience.
STOPSIGNAL SIGINT
EXPOSE 5432
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["postgres"]
