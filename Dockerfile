# Build: the same `cargo build --release --locked` as anywhere else.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin sitemapd

# Run: a small image, an unprivileged user, the binary as PID 1 so SIGTERM
# reaches it and it shuts down gracefully.
FROM debian:bookworm-slim
RUN useradd --system --uid 10001 sitemapd
COPY --from=build /src/target/release/sitemapd /usr/local/bin/sitemapd
USER sitemapd
ENV SITEMAPD_LISTEN=0.0.0.0:8080
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/sitemapd"]
CMD ["serve"]
