// Command image builds jobgate's OCI image without a Docker engine (make
// image): it compiles cmd/jobgate as a static binary (CGO_ENABLED=0,
// -trimpath, no build id) and lays it on a root file system of a few
// files of its own (passwd and group naming the uid/gid 65532 it runs as,
// a CA bundle, /tmp, the data volume /var/lib/jobgate), then writes a
// docker-loadable tarball (bin/jobgate-image.tar: docker load, podman
// load, skopeo copy docker-archive:...).
//
// It is a module of its own so that go-containerregistry stays out of
// jobgate's go.mod. The image is reproducible: every time in it (file
// times, the config's created) is SOURCE_DATE_EPOCH, by default the
// commit's time, so two builds of one commit have one digest. Its tests
// (make test) check that, and run the entrypoint from the unpacked root
// file system as the image's user, reaching /readyz.
package main
