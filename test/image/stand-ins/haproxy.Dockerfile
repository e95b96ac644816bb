# A stand-in for the official haproxy image compose.yaml names, for a machine that cannot pull it (the image
# test builds it only then, tagged with that name). HAProxy 3.0 as Debian packages it: trixie's, as
# bookworm has 2.6 only. As the official image: it runs as the haproxy user, in the foreground (-db) as a
# master and its worker (-W), on /usr/local/etc/haproxy/haproxy.cfg (which compose.yaml mounts).
FROM debian:trixie-slim
RUN apt-get update \
  && apt-get install -y --no-install-recommends haproxy \
  && rm -rf /var/lib/apt/lists/* \
  && mkdir -p /usr/local/etc/haproxy
USER haproxy
# SIGUSR1: HAProxy's soft stop (the official image's choice): it stops listening, finishes the requests
# in flight, then exits.
STOPSIGNAL SIGUSR1
CMD ["haproxy", "-W", "-db", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]
