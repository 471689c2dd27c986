# tiler: cut gigapixel images into tile pyramids and serve them.
#   docker build -t tiler .
#   docker run --rm -v "$PWD/photos:/in:ro" -v "$PWD/tiles:/data" tiler cut /in/photo.jpg   # into /data
#   docker run -d -p 8080:8080 -v "$PWD/tiles:/data:ro" tiler        # serves /data
# See docs/container.md.

# ---- build: the Swift toolchain plus libvips/libpng/libdeflate/libjpeg/libwebp/libcurl headers
FROM swift:6.3-bookworm AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libvips-dev libpng-dev libdeflate-dev libjpeg62-turbo-dev libwebp-dev libcurl4-openssl-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Dependencies first, so that editing the sources does not fetch them again.
COPY Package.* ./
RUN swift package resolve
COPY Sources ./Sources
COPY Tests ./Tests
RUN swift build -c release --static-swift-stdlib --product tiler \
 && install -D -m 0755 "$(swift build -c release --static-swift-stdlib --show-bin-path)/tiler" /out/tiler \
 && strip --strip-debug /out/tiler

# ---- runtime: slim Debian with the libvips, libpng, libdeflate, libjpeg, libwebp and libcurl runtime
# libraries (ca-certificates: libcurl verifies an https:// object store against them; libgs-common:
# Ghostscript's default_cmyk.icc, for CMYK images without a profile of their own, 0.3 MB.)
FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libvips42 libpng16-16 libdeflate0 libjpeg62-turbo libwebp7 libcurl4 ca-certificates libgs-common \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 tiler \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /data \
      --shell /usr/sbin/nologin tiler \
 && install -d -o 10001 -g 10001 /data
COPY --from=build /out/tiler /usr/local/bin/tiler
USER 10001:10001
WORKDIR /data
# `tiler serve` reads TILER_HOST and TILER_PORT; `tiler healthcheck` reads TILER_PORT.
# TILER_ROOT is the default ROOT of cut, serve and ls: /data, the volume.
ENV TILER_HOST=0.0.0.0 TILER_PORT=8080 TILER_ROOT=/data
EXPOSE 8080
VOLUME /data
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["tiler", "healthcheck"]
ENTRYPOINT ["tiler"]
CMD ["serve", "/data"]
