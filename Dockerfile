# The Sluicegate service with a JRE, the resolved Kafka/Spark jars and the Spark driver's class archive.
FROM python:3.11-slim-bookworm

RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless maven \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY pyproject.toml README.md ./
COPY supervisor ./supervisor
COPY tasks ./tasks
COPY migrations ./migrations
COPY examples ./examples

ENV SLUICEGATE_JAR_CACHE=/opt/sluicegate/jars \
    SLUICEGATE_HOST=0.0.0.0 \
    SLUICEGATE_AUTH=basic \
    SLUICEGATE_PORT=8090 \
    SLUICEGATE_METADATA_URL=sqlite:////var/lib/sluicegate/sluicegate.db \
    SLUICEGATE_DEEP_STORAGE=/var/lib/sluicegate/segments \
    SLUICEGATE_WORK_DIR=/var/lib/sluicegate/work

RUN pip install --no-cache-dir . \
 && sluicegate resolve-jars \
 && rm -rf /root/.m2 \
 && apt-get purge -y maven && apt-get autoremove -y

VOLUME /var/lib/sluicegate
EXPOSE 8090
HEALTHCHECK --interval=30s --timeout=5s \
  CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8090/status/health')"
# `serve` migrates the metadata DB to the newest schema, then serves the API and /console/.
# Authentication is on (a container's port is reached from outside): the first start creates
# the admin user with SLUICEGATE_ADMIN_PASSWORD, or prints a generated password once.
CMD ["sluicegate", "serve"]
