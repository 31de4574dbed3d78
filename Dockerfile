# Brook in a container: a release build, then a slim runtime image.
FROM rust:1-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends libclang-dev clang && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release -p brook

FROM debian:bookworm-slim
COPY --from=build /src/target/release/brook /usr/local/bin/brook
VOLUME /var/lib/brook
EXPOSE 9092 9644
ENTRYPOINT ["brook", "--override", "log.dirs=/var/lib/brook"]
