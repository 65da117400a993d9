# syntax=docker/dockerfile:1
#
# The dispatcher image: a static Go binary on distroless, run as nonroot.
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t REGISTRY/sms-dispatcher:TAG .
#
# k8s/manifests_test.go checks the stages, the base, USER and ENTRYPOINT.

# Build on the builder's own platform and cross-compile for the target's,
# so a multi-arch build (--platform linux/amd64,linux/arm64) needs no
# emulation.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src

# Modules first: this layer is rebuilt only when go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download && go mod verify

COPY . .
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=dev
# Static (no cgo, so no libc in the image), reproducible paths, no symbol
# tables; the version is stamped into main.version (the linker ignores -X
# for a variable cmd/dispatcher does not declare). -tags nodemo leaves out
# `dispatcher demo` and what it runs on (in-process Pub/Sub, Redis and
# provider simulator): the image's binary has no test servers.
RUN --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -tags nodemo -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/dispatcher ./cmd/dispatcher

# distroless/static: CA certificates, tzdata and /etc/passwd with the
# nonroot user, nothing else: no shell, no package manager.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/dispatcher /dispatcher
# distroless's nonroot user, by number: Kubernetes can verify runAsNonRoot
# only for a numeric user.
USER 65532:65532
# /metrics, /healthz, /readyz (HTTP_ADDR), internal; delivery receipts
# (RECEIPTS_ADDR=:8081, k8s/overlays/receipts), posted from the internet
# through an Ingress. Both are plain HTTP: TLS ends in front of the pod.
EXPOSE 8080 8081
ENTRYPOINT ["/dispatcher"]
CMD ["serve"]
