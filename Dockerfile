# syntax=docker/dockerfile:1
# Build stage: the same release build CI runs (.ci/run), nothing else.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin sitemapd

# Runtime: distroless (glibc, CA certificates, no shell), as the unprivileged
# user it ships. The binary is PID 1, so SIGTERM from the runtime reaches it
# and it shuts down gracefully (see shutdown_grace_seconds).
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/sitemapd /usr/local/bin/sitemapd
USER nonroot:nonroot
ENV SITEMAPD_LISTEN=0.0.0.0:8080
# The operators' port (metrics, left-out rows, probes): for the container
# network only; publish 8080 alone.
ENV SITEMAPD_METRICS_LISTEN=0.0.0.0:8081
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["/usr/local/bin/sitemapd", "health"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/sitemapd"]
CMD ["serve"]
