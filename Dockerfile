# Brook in a container: a release build, then a slim runtime image (docker-compose.yml runs three).
# Configure it with Kafka's property names as BROOK_<NAME> variables or `--override key=value`
# arguments after the image name; the data lives in the /var/lib/brook volume.
FROM rust:1-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends libclang-dev clang && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release -p brook

FROM debian:bookworm-slim
COPY --from=build /src/target/release/brook /usr/local/bin/brook
VOLUME /var/lib/brook
# Kafka clients, the controller (raft) listener of docker-compose.yml, metrics.
EXPOSE 9092 9093 9644 19092
ENTRYPOINT ["brook", "--override", "log.dirs=/var/lib/brook"]
