# syntax=docker/dockerfile:1.7
# check=skip=all
ARG BASE=alpine:3.20
ARG VERSION
FROM --platform=$BUILDPLATFORM ${BASE} AS build
ARG TARGETARCH
ARG VERSION=1.0
WORKDIR /src
COPY --link go.mod go.sum ./
RUN --mount=type=cache,target=/root/.cache \
    --mount=type=bind,source=vendor,target=/src/vendor \
    --mount=type=secret,id=token,required=true \
    echo building ${VERSION} for ${TARGETARCH:-amd64}
ADD --checksum=sha256:0000000000000000000000000000000000000000000000000000000000000000 https://example.com/a.tar.gz /tmp/
ADD https://github.com/moby/moby.git#v20.10.0 /moby
COPY --exclude=*.md --chown=1000:1000 . .
RUN <<EOT
set -e
echo heredoc
EOT

FROM build AS test
RUN --mount=type=bind,from=build,source=/src,target=/x ls /x

FROM scratch
COPY --from=build /src/out /out
COPY --from=busybox:1.36 /bin/sh /sh
ONBUILD RUN echo hi
ENTRYPOINT ["/out"]
