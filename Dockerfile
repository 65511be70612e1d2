# The paddock image: the CLI (daemon included) and the kernel, two static binaries. It is
# built from binaries made beforehand, so it builds offline, with no base image to pull:
#
#   CGO_ENABLED=0 go build -trimpath -o dist/paddock ./cmd/paddock
#   CGO_ENABLED=0 go build -trimpath -o dist/paddock-kernel ./cmd/paddock-kernel
#   docker build -t paddock .
#
# paddock finds the kernel beside itself. The kernel also works from this image in any
# other container: it needs nothing but a Linux kernel.
FROM scratch
COPY dist/paddock dist/paddock-kernel /usr/local/bin/
ENV PATH=/usr/local/bin
LABEL paddock="1" paddock.image="paddock"
ENTRYPOINT ["/usr/local/bin/paddock"]
CMD ["--help"]
