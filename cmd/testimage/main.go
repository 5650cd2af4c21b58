// Command testimage builds the test agent image (bridged-agent:test by
// default) without any registry: it builds ./agent-runner and
// ./cmd/fakeclaude as static binaries and imports a root filesystem holding
// them and the host's static busybox (`apt-get install busybox-static`)
// through the Docker Engine API. It skips the import when the image already
// holds the same binaries, unless -force is given.
//
//	go run ./cmd/testimage [-tag bridged-agent:test] [-repo DIR] [-busybox /bin/busybox] [-force]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/moby/moby/client"

	"github.com/bridged-app/bridged/internal/testimage"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "testimage:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("testimage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	tag := fs.String("tag", testimage.DefaultTag, "image `name:tag` to make")
	repo := fs.String("repo", "", "module root holding ./agent-runner and ./cmd/fakeclaude (default: found from the working directory)")
	busybox := fs.String("busybox", testimage.HostBusybox, "`path` of a statically linked busybox for the image's shell")
	force := fs.Bool("force", false, "import even when the image is up to date")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return fmt.Errorf("docker client: %w", err)
	}
	defer cli.Close()
	imported, err := testimage.EnsureAgent(ctx, cli, testimage.Options{Tag: *tag, RepoRoot: *repo, Busybox: *busybox, Force: *force})
	if err != nil {
		return err
	}
	if imported {
		fmt.Fprintf(stdout, "imported %s\n", *tag)
	} else {
		fmt.Fprintf(stdout, "%s is up to date\n", *tag)
	}
	return nil
}
